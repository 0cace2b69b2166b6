"""The GAN task's commands (:class:`oars.tasks.Commands`): the ``tools/demo_data.py`` sets ``digits`` (the CGAN demo)
and ``pairs`` (the pix2pix demo). Everything heavy is imported inside the functions.
"""

from __future__ import annotations

import argparse

from oars.tasks import Commands, Subcommand


class GANCommands(Commands):
    """What the GAN task adds to the tools."""

    def subcommands(self) -> list[Subcommand]:
        """``tools/demo_data.py digits``: the CGAN demo's coloured digits (python -m gan.demo_data); ``pairs``: the
        pix2pix demo's label map -> photo pairs rendered from the demo shapes (python -m gan.demo_pairs)."""
        return [Subcommand("demo_data", "digits", "coloured digit images in 10 class folders (the CGAN demo; python "
                           "-m gan.demo_data)", _demo_arguments, _run_demo,
                           usage="tools/demo_data.py digits --out data/demo_gan"),
                Subcommand("demo_data", "pairs", "label map -> photo pairs rendered from the demo shapes (the pix2pix "
                           "demo; python -m gan.demo_pairs)", _pairs_arguments, _run_pairs,
                           usage="tools/demo_data.py pairs --shapes data/demo_shapes --out data/demo_pix2pix")]


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    from gan.demo_data import add_arguments

    add_arguments(parser)


def _run_demo(args: argparse.Namespace) -> int:
    from gan.demo_data import run

    return run(args)


def _pairs_arguments(parser: argparse.ArgumentParser) -> None:
    from gan.demo_pairs import add_arguments

    add_arguments(parser)


def _run_pairs(args: argparse.Namespace) -> int:
    from gan.demo_pairs import run

    return run(args)
