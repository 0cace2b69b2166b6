"""What ``tools/browse_dataset.py`` does: build a config's dataset as the runner does and draw what its pipeline
feeds the model (augmentations applied), one picture per sample, through the config's task
(:meth:`oars.task_roles.Data.draw_pipeline_sample`).

Why: a loss that turns NaN, or a model that learns nothing, is most often a data problem (boxes off the image
after an augmentation, label values outside the classes, a channel-order mix-up); looking at the packed
samples is the quickest way to see it (MMDetection's ``browse_dataset.py``, PaddleSeg's data tools).
"""

from __future__ import annotations

import copy
import os
import os.path as osp
import re
from collections.abc import Sequence
from typing import Any

from oars.errors import OarsError

PHASES = ("train", "val", "test")
_STEM_KEYS = ("img_path", "filename", "frame_dir", "video_name", "feature_path")


def _data_root(ds_cfg: dict) -> str | None:
    """The ``data_root`` of a dataset config or of the dataset a wrapper holds (first found)."""
    while isinstance(ds_cfg, dict):
        if ds_cfg.get("data_root"):
            return str(ds_cfg["data_root"])
        inner = ds_cfg.get("dataset")
        if inner is None and isinstance(ds_cfg.get("datasets"), list) and ds_cfg["datasets"]:
            inner = ds_cfg["datasets"][0]
        ds_cfg = inner
    return None


def sample_stem(sample: dict) -> str:
    """A file-name-safe stem for ``sample``: its image/video file's stem, else ``sample``."""
    data = sample.get("data_samples")
    meta = getattr(data, "metainfo", {}) if data is not None else {}
    for key in _STEM_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value:
            stem = osp.splitext(osp.basename(value.rstrip("/\\")))[0]
            return re.sub(r"[^A-Za-z0-9._-]+", "_", stem)[:80] or "sample"
    return "sample"


def build_dataset(cfg: Any, phase: str) -> Any:
    """The dataset of ``cfg.<phase>_dataloader.dataset``, built in the config's scope as the Runner builds it
    (the task's registries activated first), annotations read.

    Raises:
        OarsError: no such dataloader/dataset in the config, naming the file and the key.
    """
    from mmengine.registry import DATASETS, DefaultScope

    from oars.tasks import activate

    key = f"{phase}_dataloader"
    loader = cfg.get(key)
    if not loader or not isinstance(loader.get("dataset"), dict):
        have = [p for p in PHASES if isinstance((cfg.get(f"{p}_dataloader") or {}).get("dataset"), dict)]
        raise OarsError(f"{cfg.filename}: no {key}.dataset to browse (--phase {phase}); the config has "
                        f"{', '.join(have) or 'no dataloaders'}")
    scope = cfg.get("default_scope")
    activate(scope)
    with DefaultScope.overwrite_default_scope(scope):
        dataset = DATASETS.build(copy.deepcopy(loader["dataset"]))
    if hasattr(dataset, "full_init"):
        dataset.full_init()
    return dataset


def browse(config: str, overrides: Sequence[str], out_dir: str, phase: str = "train", num: int = 16,
           progress: bool = True) -> list[str]:
    """Draw the first ``num`` samples of a config's ``phase`` dataset into ``out_dir/<index>_<stem>.png``.

    Args:
        config: the YAML config; overrides: ``-o key=value`` overrides.
        out_dir: the output folder (created; refused when it is the data folder or inside it).
        phase: ``train`` (augmentations on), ``val`` or ``test``.
        num: how many samples (from index 0); fewer when the dataset is smaller.
        progress: show a tqdm bar.

    Returns:
        The paths written, in index order.

    Raises:
        OarsError: bad phase/num, no such dataset, an output folder inside the data, or the task has no pictures.
    """
    import cv2
    from tqdm import tqdm

    from oars.engine.run_setup import load
    from oars.engine.validate import validate_config
    from oars.tasks import get_task
    from oars_deploy.atomic import atomic_write
    from oars_deploy.output_paths import check_output_folder

    if phase not in PHASES:
        raise OarsError(f"--phase {phase!r}: expected one of {', '.join(PHASES)}")
    if num < 1:
        raise OarsError(f"--num {num}: expected a positive number of samples")
    cfg = load(config, overrides)
    validate_config(cfg)
    data = get_task(cfg.get("default_scope"), config).data(cfg)
    ds_cfg = (cfg.get(f"{phase}_dataloader") or {}).get("dataset") or {}
    check_output_folder(out_dir, _data_root(ds_cfg), flag="-o", input_flag=f"{phase}_dataloader.dataset.data_root")
    dataset = build_dataset(cfg, phase)
    count = min(num, len(dataset))
    if count == 0:
        raise OarsError(f"{config}: the {phase} dataset is empty; nothing to browse")
    meta = dict(dataset.metainfo)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    width = max(5, len(str(count - 1)))
    for i in tqdm(range(count), desc=f"browse {phase}", unit="sample", disable=not progress, dynamic_ncols=True):
        sample = dataset[i]
        if sample is None:  # a pipeline that drops a sample on purpose (e.g. no boxes left after a crop)
            continue
        try:
            picture = data.draw_pipeline_sample(sample, meta)
        except (ValueError, KeyError) as err:
            raise OarsError(f"{config}: {phase} sample {i} ({sample_stem(sample)}): cannot draw it: {err}") from None
        ok, png = cv2.imencode(".png", picture)
        if not ok:
            raise OarsError(f"{phase} sample {i}: OpenCV could not encode its picture as PNG")
        path = osp.join(out_dir, f"{i:0{width}d}_{sample_stem(sample)}.png")
        atomic_write(path, png.tobytes())
        written.append(path)
    return written
