"""Write a config's dataset split as WebDataset tar shards plus index.json, locally or to a URL:
tools/make_shards.py -c CONFIG --split train|val|test --out DIR_OR_URL [--shard-size 1GB] [--overwrite]
[--storage-options '{endpoint_url: http://host:9000}'] [-o key=value ...]. Train from them with
`type: ShardDataset, shards: DIR_OR_URL` (docs/data.md, "Shards")."""

import yaml

from oars.cli import base_parser, run_cli
from oars.errors import OarsError
from oars_deploy.words import plural


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--split", required=True, choices=("train", "val", "test"),
                        help="which dataloader's dataset to write")
    parser.add_argument("--out", required=True, help="the output folder or URL (s3://bucket/prefix, ...)")
    parser.add_argument("--shard-size", default="1GB", help="the most bytes per shard, e.g. 1GB, 500MB (default 1GB)")
    parser.add_argument("--overwrite", action="store_true", help="replace the shards an existing --out holds")
    parser.add_argument("--storage-options", default=None,
                        help="fsspec options for a URL --out, as YAML (no credentials: those come from the "
                             "environment)")
    args = parser.parse_args()
    from oars.config.check import load_checked_config
    from oars.data.shards.writer import make_shards, parse_size

    size = parse_size(args.shard_size)
    options = None
    if args.storage_options:
        try:
            options = yaml.safe_load(args.storage_options)
        except yaml.YAMLError as err:
            raise OarsError(f"--storage-options: not YAML ({err})") from None
    cfg = load_checked_config(args.config, args.overrides)
    index = make_shards(cfg, args.split, args.out, size, args.overwrite, options)
    print(f"wrote {plural(index['total'], 'sample')} in {plural(len(index['shards']), 'shard')} and index.json to "
          f"{args.out}")


if __name__ == "__main__":
    run_cli(main)
