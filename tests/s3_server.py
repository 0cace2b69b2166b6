"""A loopback S3 endpoint for the storage tests: moto's ``ThreadedMotoServer`` on 127.0.0.1 and a free port.

Why moto: no real S3 server (MinIO, SeaweedFS, Garage) can be installed on these machines; the client code (s3fs
through ``oars.data.storage``) is the same for a real one. Credentials are dummy values put in the environment,
the way a user gives real ones (never in a config).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: the dummy credentials the tests put in the environment (a test greps the work dirs for the secret)
ACCESS_KEY_ID = "oarstestkeyid"
SECRET_ACCESS_KEY = "oars-dummy-secret-9f3c2b7e"
BUCKET = "oars-data"


@dataclass
class S3Server:
    """A running endpoint: ``endpoint_url`` (``http://127.0.0.1:PORT``) and ``bucket`` (created, empty)."""

    endpoint_url: str
    bucket: str

    @property
    def storage_options(self) -> dict:
        """What a config's ``storage_options`` says to reach it (no credential: those are in the environment)."""
        return {"endpoint_url": self.endpoint_url}

    def filesystem(self):
        """A fresh s3fs filesystem on this endpoint (credentials from the environment)."""
        import s3fs

        return s3fs.S3FileSystem(endpoint_url=self.endpoint_url, skip_instance_cache=True)

    def upload(self, local_dir: str, prefix: str) -> str:
        """Copy ``local_dir`` (recursively) to ``s3://bucket/prefix``; returns that URL."""
        url = f"s3://{self.bucket}/{prefix.strip('/')}"
        self.filesystem().put(local_dir.rstrip("/") + "/", url + "/", recursive=True)
        return url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def s3_environment(tmp_dir: str) -> Iterator[None]:
    """Dummy credentials in the environment, the user's own AWS files and proxies out of the way; restored after."""
    values = {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_SHARED_CREDENTIALS_FILE": os.path.join(tmp_dir, "no-aws-credentials"),
        "AWS_CONFIG_FILE": os.path.join(tmp_dir, "no-aws-config"),
        "XDG_CACHE_HOME": os.path.join(tmp_dir, "cache"),  # local_copy and cache: keep their copies here
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    dropped = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "OARS_STORAGE_OPTIONS")
    saved = {k: os.environ.get(k) for k in (*values, *dropped)}
    os.environ.update(values)
    for k in dropped:
        os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def running_s3_server(tmp_dir: str) -> Iterator[S3Server]:
    """A moto S3 server on 127.0.0.1 (a free port) with ``BUCKET`` created, inside :func:`s3_environment`."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    with s3_environment(tmp_dir):
        port = _free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        try:
            s3 = S3Server(endpoint_url=f"http://127.0.0.1:{port}", bucket=BUCKET)
            s3.filesystem().mkdir(BUCKET)
            yield s3
        finally:
            server.stop()


@contextmanager
def moto_process(env: dict[str, str] | None = None) -> Iterator[str]:
    """moto's S3 server in its own process (``python -m moto.server`` on a free loopback port, environment
    ``env`` or this one's), stopped at the end; yields its endpoint URL once it answers.

    Why a process: a benchmark that spawns DataLoader workers must not share its GIL with the endpoint, and a
    server with another environment (authentication enforced) cannot be a thread of this one.

    Raises:
        RuntimeError: the server did not answer within 60 s, naming the port and its exit status.
    """
    import subprocess
    import sys
    import time

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not start on 127.0.0.1:{port} (exit status "
                                       f"{proc.poll()})") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def refusing_s3_server() -> Iterator[str]:
    """A second moto server, in its own process, that enforces authentication from its first request
    (``INITIAL_NO_AUTH_ACTION_COUNT=0``): the dummy credentials are unknown to it, so every request is refused
    with 403 as a real S3 refuses wrong credentials. Yields its endpoint URL."""
    with moto_process(dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="0")) as url:
        yield url
