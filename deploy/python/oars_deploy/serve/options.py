"""The settings of one ``oars-serve`` application, from the command line or a Ray Serve config file's ``args``.

One dataclass holds them with their defaults, so the CLI, the app builder (``serve run serve.yaml``) and the tests
read the same values; :meth:`ServeOptions.from_dict` refuses an unknown key or a bad value with the key, the value
and what was expected.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, fields

from oars_deploy.errors import DeployError


@dataclass(frozen=True)
class ServeOptions:
    """What a deployment of one export needs.

    Attributes:
        model_dir: the export folder (deploy.yaml + model), read once when a replica starts.
        device / backend: as ``oars-infer`` (cpu|cuda, onnxruntime|tensorrt).
        replicas: Ray Serve replicas of the deployment. replica_cpus: Ray CPUs reserved per replica.
        max_batch: most requests one model call takes (``@serve.batch``; 1 for a static-batch export).
        batch_wait_ms: how long a replica waits for a batch to fill.
        token_file: a file whose first line is the bearer token /predict, /model and /metrics require (None: open).
        max_body_mb: the largest request body, MiB. max_pixels: the largest decoded image (width * height).
        max_queue: requests a replica holds at once (reading, waiting for a batch, running); more get 503.
        retry_after_s: the Retry-After of a 503. topk: classes in a clip / feature record.
        app_name: the Ray Serve application name (and its metrics actor's).
    """

    model_dir: str
    device: str = "cpu"
    backend: str = "onnxruntime"
    replicas: int = 1
    replica_cpus: float = 1.0
    max_batch: int = 8
    batch_wait_ms: float = 5.0
    token_file: str | None = None
    max_body_mb: float = 20.0
    max_pixels: int = 40_000_000
    max_queue: int = 64
    retry_after_s: int = 1
    topk: int = 5
    app_name: str = "oars"

    def __post_init__(self) -> None:
        checks = {"replicas": self.replicas >= 1, "max_batch": self.max_batch >= 1,
                  "batch_wait_ms": self.batch_wait_ms >= 0, "max_body_mb": self.max_body_mb > 0,
                  "max_pixels": self.max_pixels >= 1, "max_queue": self.max_queue >= 1,
                  "retry_after_s": self.retry_after_s >= 0, "topk": self.topk >= 1,
                  "replica_cpus": self.replica_cpus >= 0, "device": self.device in ("cpu", "cuda")}
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            key = bad[0]
            raise DeployError(f"oars-serve option {key}: got {getattr(self, key)!r}; expected "
                              + ("'cpu' or 'cuda'" if key == "device" else "a positive value (>= 0 for waits and "
                                                                            "CPUs)"))

    @property
    def max_body_bytes(self) -> int:
        """``max_body_mb`` in bytes."""
        return int(self.max_body_mb * 1024 * 1024)

    @classmethod
    def from_dict(cls, values: dict) -> ServeOptions:
        """From a config file's ``args`` (or the CLI's): unknown keys and wrong types are refused.

        Raises:
            DeployError: naming the key, the value, and the closest valid key or the expected type.
        """
        if not isinstance(values, dict):
            raise DeployError(f"oars-serve args: expected a mapping, got {type(values).__name__}")
        known = {f.name: f for f in fields(cls)}
        if "model_dir" not in values:
            raise DeployError("oars-serve args: model_dir (the export folder) is required")
        out = {}
        for key, value in values.items():
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                raise DeployError(f"oars-serve args: unknown key {key!r}"
                                  + (f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(known)}"))
            out[key] = _coerce(key, value, known[key].type)
        return cls(**out)

    def to_dict(self) -> dict:
        """The options as plain values (a config file's ``args``; the token itself is never in it, only its file)."""
        return dataclasses.asdict(self)


def _coerce(key: str, value, annotation: str):
    """``value`` as the type the annotation names (ints and floats from YAML / strings), or a DeployError."""
    if value is None and "None" in annotation:
        return None
    kind = annotation.split("|")[0].strip()
    try:
        if kind == "int":
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError
            return int(float(value))
        if kind == "float":
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind == "str":
            if not isinstance(value, str):
                raise ValueError
            return value
    except (TypeError, ValueError):
        raise DeployError(f"oars-serve args: {key} = {value!r}; expected {annotation}") from None
    return value
