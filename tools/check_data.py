"""Read every sample of a config's datasets once and list every bad file: tools/check_data.py -c CONFIG
[-o key=value ...] [--split train val test] [--workers N] [--data-root URL] [--storage-option KEY=VALUE ...]
[--sample N [--seed S]]. Exit status 2 when any sample cannot be used.

Data on object storage: give the data root as a URL (--data-root s3://bucket/set, or the config's data_root), the
endpoint and other options with --storage-option (or the config's storage_options); credentials come from the
environment or the standard files. --sample N reads a seeded random sample of N samples per dataset instead of all."""

from oars.cli import base_parser, run_cli
from oars.data.check import SPLITS, check_config, format_reports, parse_storage_options
from oars.errors import DataError


def _positive(flag: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise DataError(f"{flag} {value}: expected a positive number of samples per dataset")


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--split", nargs="+", choices=SPLITS, default=list(SPLITS),
                        help="which dataloaders' datasets to read (default: all the config has)")
    parser.add_argument("--workers", type=int, default=None,
                        help="DataLoader workers per split (default: the split's num_workers, at least 1)")
    parser.add_argument("--data-root", default=None, metavar="PATH_OR_URL",
                        help="the data_root of every dataset (a folder, or a URL such as s3://bucket/set)")
    parser.add_argument("--storage-option", dest="storage_options", nargs="+", action="extend", default=[],
                        metavar="KEY=VALUE", help="storage_options of every dataset, e.g. "
                        "endpoint_url=http://127.0.0.1:9000 anon=true (values parsed as YAML; no credentials: "
                        "those come from the environment)")
    parser.add_argument("--sample", type=int, default=None, metavar="N",
                        help="read a random sample of N samples per dataset instead of all (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0: the same sample each run)")
    args = parser.parse_args()
    _positive("--sample", args.sample)
    options = parse_storage_options(args.storage_options)
    from oars.config.check import load_checked_config

    reports = check_config(load_checked_config(args.config, args.overrides), args.split, args.workers,
                           sample=args.sample, seed=args.seed, data_root=args.data_root, storage_options=options)
    print(format_reports(reports))
    bad = sum(len(r.failures) for r in reports)
    if bad:
        total = sum(r.num_samples for r in reports)
        raise DataError(f"{bad} bad sample(s) or dataset(s) among {total} sample(s) read (listed above); fix or "
                        "remove those files, or set `on_bad_sample: skip` on a training dataset")
    if not reports:
        raise DataError(f"{args.config} has no {'/'.join(args.split)} dataloader with a dataset to check")


if __name__ == "__main__":
    run_cli(main)
