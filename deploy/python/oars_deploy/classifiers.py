"""What the top-k classifiers' runs check alike: the clip and feature-file classifiers of ``oars-infer`` and a
stream classified window by window (:mod:`oars_deploy.streams.windows`, for ``oars-infer`` and ``tools/infer.py``).
"""

from __future__ import annotations

import argparse

from oars_deploy.errors import DeployError


def check_classify_args(args: argparse.Namespace, kind: str) -> None:
    """``--topk``/``--batch-size``/``--draw-threshold`` of a classifier run (``kind``: 'video', 'feature')."""
    if args.topk < 1:
        raise DeployError(f"--topk must be >= 1, got {args.topk}")
    if args.batch_size is not None and args.batch_size < 1:
        raise DeployError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.draw_threshold is not None:
        raise DeployError(f"--draw-threshold applies to detection models, not to {kind} classifiers")
