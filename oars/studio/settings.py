"""What one studio serves: its workspace, where it listens, and its limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: the one host the studio serves without a token: nothing else on the network can reach it
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class StudioSettings:
    """One studio's settings (built by ``oars-studio`` from its flags, or by tests).

    Attributes:
        workspace: the folder that holds the studio's state: ``runs/`` (work dirs it launched), ``exports/``,
            ``uploads/`` and ``studio.sqlite`` (the index). Created when missing.
        host, port: where uvicorn listens. A host other than the loopback needs ``token``.
        token: the access token (read from ``--token-file``); None serves without login, loopback only.
        data_roots: folders outside the workspace that requests may name (registered data sets); every path from
            a request must resolve inside the workspace or one of these.
        max_upload_bytes: the largest upload accepted ("try it" images, videos).
        max_concurrent_runs: training runs the studio runs at once; more wait in a queue.
        python: the interpreter that runs training and export jobs (the studio's own by default).
    """

    workspace: Path
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    data_roots: tuple[Path, ...] = field(default_factory=tuple)
    max_upload_bytes: int = 64 * 1024 * 1024
    max_concurrent_runs: int = 1
    python: str | None = None

    @property
    def needs_token(self) -> bool:
        """Whether requests must carry the token (always when one is set, and a non-loopback host must set one)."""
        return self.token is not None
