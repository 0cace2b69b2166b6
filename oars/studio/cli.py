"""``oars-studio``: serve the studio over a workspace folder (``make studio`` runs it on ./studio_workspace)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from oars.cli import run_cli
from oars.studio.security import check_serving, read_token_file
from oars.studio.settings import StudioSettings


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="oars-studio", description=__doc__)
    parser.add_argument("--workspace", default="studio_workspace", metavar="DIR",
                        help="the studio's folder: runs/, exports/, uploads/ and its index (created when missing)")
    parser.add_argument("--host", default="127.0.0.1", help="where to listen (default: this machine only); any "
                        "other host needs --token-file")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token-file", default=None, metavar="F",
                        help="a file whose first line is the access token: the login form asks for it, API calls "
                             "send 'Authorization: Bearer <token>'")
    parser.add_argument("--data-root", action="append", default=[], metavar="DIR",
                        help="a folder outside the workspace that the studio may read data sets from (repeatable)")
    return parser.parse_args(argv)


def settings_from_args(args: argparse.Namespace) -> StudioSettings:
    """The settings the flags describe, checked (a non-loopback host without a token is refused)."""
    token = read_token_file(args.token_file) if args.token_file else None
    settings = StudioSettings(workspace=Path(args.workspace), host=args.host, port=args.port, token=token,
                              data_roots=tuple(Path(p) for p in args.data_root))
    check_serving(settings)
    return settings


def main(argv: Sequence[str] | None = None) -> None:
    def serve() -> None:
        try:
            import uvicorn

            from oars.studio.app import create_app
        except ImportError as err:
            from oars.studio.security import StudioError
            raise StudioError(f"oars-studio needs the studio extra ({err.name} is missing): "
                              "pip install -e '.[studio]'") from None
        settings = settings_from_args(parse_args(argv))
        print(f"oars studio on http://{settings.host}:{settings.port}  (workspace {settings.workspace.resolve()})")
        uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="warning")

    run_cli(serve)


if __name__ == "__main__":
    main()
