"""Draw what a config's data pipeline feeds the model (augmentations applied), one PNG per sample:
tools/browse_dataset.py -c CONFIG -o OUT_DIR [--phase train|val|test] [--num N] [-o key=value ...].

Detection: boxes (and masks) with class names; segmentation: label map over the image with a legend; video:
a strip of the sampled frames with the label; GAN: input | target. Writes OUT_DIR/<index>_<stem>.png."""

from oars.cli import base_parser, run_cli, split_output_and_overrides
from oars_deploy.words import plural


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--output-dir", default=None, help="the output folder (or give it as the -o value "
                                                           "without '=')")
    parser.add_argument("--phase", default="train", choices=("train", "val", "test"),
                        help="which dataloader's dataset to draw (default train: augmentations on)")
    parser.add_argument("--num", type=int, default=16, help="how many samples, from the first (default 16)")
    args = parser.parse_args()
    out_dir, overrides = split_output_and_overrides(args.overrides, args.output_dir)
    from oars.analysis.browse import browse

    written = browse(args.config, overrides, out_dir, phase=args.phase, num=args.num)
    print(f"wrote {plural(len(written), 'picture')} to {out_dir}")


if __name__ == "__main__":
    run_cli(main)
