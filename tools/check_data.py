"""Read every sample of a config's datasets once and list every bad file: tools/check_data.py -c CONFIG
[-o key=value ...] [--split train val test] [--workers N]. Exit status 2 when any sample cannot be used."""

from oars.cli import base_parser, run_cli
from oars.data.check import SPLITS, check_config, format_reports
from oars.errors import DataError


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--split", nargs="+", choices=SPLITS, default=list(SPLITS),
                        help="which dataloaders' datasets to read (default: all the config has)")
    parser.add_argument("--workers", type=int, default=None,
                        help="DataLoader workers per split (default: the split's num_workers, at least 1)")
    args = parser.parse_args()
    from oars.config.check import load_checked_config

    reports = check_config(load_checked_config(args.config, args.overrides), args.split, args.workers)
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
