"""Named pretrained weights (oars.hub): python tools/hub.py COMMAND ... (COMMAND --help).

  list [--all]                         names, tasks, parameter counts, whether each file is cached
  info NAME                            URL, sha256 prefix, converter, cache path of one name
  download NAME                        fetch into the hub cache (progress bar) and verify its hash
  register NAME PATH [--config CFG]    add a local checkpoint as oars://NAME (its sha256 recorded)

NAME: torchvision://<builder>[.<weights member>] (member default: DEFAULT), oars://<registered name>, or a bare
builder / registered name. Configs take the same names wherever a checkpoint path goes:
init: {checkpoint: torchvision://resnet50}, load_from: torchvision://maskrcnn_resnet50_fpn, -w oars://NAME.
Files live in the PyTorch hub cache (torch.hub.get_dir()/checkpoints, i.e. $TORCH_HOME/hub/checkpoints);
OARS_HUB_URL replaces the download base URL (a mirror); OARS_HUB_OFFLINE=1 never downloads; registrations are
kept in $OARS_HOME/hub.json (default ~/.cache/oars/hub.json). Every load of a NAME (config, -w, oars.Model,
this tool) checks the file's sha256: torchvision's published prefix, or the full hash recorded when registering.
"""

import argparse
import os.path as osp
from collections.abc import Sequence

from oars.cli import run_cli


def _params(n: int | None) -> str:
    return "-" if not n else f"{n / 1e6:.1f}M"


def cmd_list(args: argparse.Namespace) -> None:
    from oars.hub import entry_task, list_entries

    rows = [(e.name, entry_task(e), _params(e.num_params), "yes" if e.cached else "no", e.converter or "-")
            for e in list_entries(include_all=args.all)]
    header = ("NAME", "TASK", "PARAMS", "CACHED", "CONVERTER")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def cmd_info(args: argparse.Namespace) -> None:
    from oars.hub import entry_task, resolve
    from oars.hub.download import mirrored_url

    entry = resolve(args.name)
    fields = {"name": entry.name, "task": entry_task(entry), "use": entry.use or "-",
              "url": entry.url or "- (local registration)",
              "download from": mirrored_url(entry.url) if entry.url else "-",
              "sha256": entry.sha256 or "-", "converter": entry.converter or "- (loaded as it is)",
              "params": f"{entry.num_params:,}" if entry.num_params else "-",
              "path": entry.path, "cached": "yes" if entry.cached else "no"}
    width = max(map(len, fields))
    for key, value in fields.items():
        print(f"{key.ljust(width)}  {value}")


def cmd_download(args: argparse.Namespace) -> None:
    from oars.hub.loading import hub_file

    # hub_file checks the sha256 of a file already cached (or registered) as of one it downloads: the same check
    # as every load of the name (oars.hub.verify.check_hash)
    entry, path = hub_file(args.name, progress=not args.quiet)
    checked = f"sha256 {entry.sha256} checked" if entry.sha256 else "no sha256 published for it: not checked"
    print(f"{entry.name}: {path} ({checked})")


def cmd_register(args: argparse.Namespace) -> None:
    from oars.hub.local import LOCAL_SCHEME, register, registry_path

    record = register(args.name, args.path, config=args.config, force=args.force)
    print(f"registered {LOCAL_SCHEME}{args.name}: {record['path']} (sha256 {record['sha256'][:12]}..., "
          f"{_params(record['num_params'])} parameters) in {registry_path()}")


def build_parser() -> argparse.ArgumentParser:
    """The tool's parser: list, info, download, register."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="the named weights, their tasks, sizes and whether they are cached")
    p.add_argument("--all", action="store_true", help="every torchvision builder and weights member")
    p.set_defaults(run=cmd_list)
    p = sub.add_parser("info", help="URL, hash, converter and cache path of one name")
    p.add_argument("name")
    p.set_defaults(run=cmd_info)
    p = sub.add_parser("download", help="fetch a name into the hub cache and verify it")
    p.add_argument("name")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=cmd_download)
    p = sub.add_parser("register", help="add a local checkpoint as oars://NAME")
    p.add_argument("name")
    p.add_argument("path", help="the checkpoint file (relative to the current folder)")
    p.add_argument("--config", default=None, help="the config it was trained with (recorded)")
    p.add_argument("--force", action="store_true", help="replace an existing registration of NAME")
    p.set_defaults(run=cmd_register)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if getattr(args, "path", None) and not osp.exists(args.path):
        from oars.hub import HubError

        raise HubError(f"register {args.name}: {args.path}: no such file")
    args.run(args)


if __name__ == "__main__":
    run_cli(main)
