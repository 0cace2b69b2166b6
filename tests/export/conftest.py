"""Fixtures of the export tests."""

from __future__ import annotations

import os

import pytest
from demo_utils import ROOT
from export_cases import shrunk_export_case


@pytest.fixture(scope="module")
def demo_case(tmp_path_factory):
    """The segmentation demo config, shrunk, with a random-weight checkpoint."""
    folder = tmp_path_factory.mktemp("export_demo")
    return shrunk_export_case(os.path.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml"), str(folder))
