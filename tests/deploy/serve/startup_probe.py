"""A client that polls a starting ``oars-serve`` from its first accepted connection until GET /health answers 200,
recording every answer (the server must answer 503 + Retry-After as JSON until then, never 404 or plain text)."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import cv2
import numpy as np


class StartupProbe(threading.Thread):
    """Polls ``url`` GET /health and POST /predict in turn (with ``token``) until /health is 200 or ``stop`` is
    set; ``answers``: ``(path, status, content_type, retry_after)`` per answer, connection failures not counted."""

    def __init__(self, url: str, token: str, timeout_s: float = 300.0) -> None:
        super().__init__(daemon=True)
        self.url, self.token, self.timeout_s = url, token, timeout_s
        self.answers: list[tuple[str, int, str, str | None]] = []
        self.stop = threading.Event()
        self.image = cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))[1].tobytes()

    def ask(self, path: str) -> bool:
        """One request; True once /health answers 200."""
        data = self.image if path == "/predict" else None
        headers = {"Authorization": f"Bearer {self.token}", **({"Content-Type": "image/png"} if data else {})}
        req = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, got = resp.status, resp.headers
        except urllib.error.HTTPError as err:
            status, got = err.code, err.headers
        except (urllib.error.URLError, OSError):
            return False  # not listening yet
        self.answers.append((path, status, got.get("Content-Type", ""), got.get("Retry-After")))
        return path == "/health" and status == 200

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not self.stop.is_set() and time.monotonic() < deadline:
            if self.ask("/health"):
                return
            self.ask("/predict")
            time.sleep(0.05)
