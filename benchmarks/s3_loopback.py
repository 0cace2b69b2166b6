"""The loopback S3 endpoint of the benchmarks: the tests' moto starter (tests/s3_server.py, ``ThreadedMotoServer`` on
127.0.0.1, dummy credentials in the environment), loaded from its file so that one piece of code starts the server
for the tests and the benchmarks alike, and tests/ is not put on ``sys.path`` (its helper modules would shadow
others)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STARTER = os.path.join(ROOT, "tests", "s3_server.py")


def s3_server_module() -> ModuleType:
    """tests/s3_server.py as a module (``running_s3_server(tmp_dir)`` yields an ``S3Server``: ``endpoint_url``,
    ``bucket``, ``storage_options``, ``upload(local_dir, prefix)``).

    Raises:
        SystemExit: moto's server or s3fs is not installed (the dev and data extras), or the starter is missing.
    """
    missing = [name for name in ("moto.server", "s3fs") if importlib.util.find_spec(name.split(".")[0]) is None]
    if missing:
        raise SystemExit(f"the loopback S3 needs {' and '.join(missing)} (pip install 'oars[dev,data]': moto[server], "
                         "s3fs)")
    if not os.path.isfile(STARTER):
        raise SystemExit(f"the loopback S3 starter {STARTER} is missing (it comes with the repository's tests/)")
    spec = importlib.util.spec_from_file_location("oars_bench_s3_server", STARTER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


@contextmanager
def s3_server_process(tmp_dir: str) -> Iterator:
    """The loopback S3 of :func:`s3_server_module`, but moto's server in its own process (``python -m moto.server``)
    rather than a thread of this one: a benchmark that spawns DataLoader workers must not share its GIL with the
    endpoint (a remote S3 serves from elsewhere). Inside the starter's ``s3_environment`` (dummy credentials);
    yields its ``S3Server`` with the bucket created.

    Raises:
        RuntimeError: the server did not answer within 60 s, naming the port and its exit status.
    """
    starter = s3_server_module()
    with starter.s3_environment(tmp_dir), starter.moto_process() as url:
        s3 = starter.S3Server(endpoint_url=url, bucket=starter.BUCKET)
        s3.filesystem().mkdir(starter.BUCKET)
        yield s3
