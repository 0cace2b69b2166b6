"""Classify frame-feature files (``.npz`` / ``.pkl``) with an exported feature model (deploy.yaml with a
``features`` section, :mod:`oars_deploy.predictors.feature_classes.config`), without torch.

``FeaturePredictor(model_dir).predict([path, ...])`` -> one dict per file: ``scores`` float32 [C] (the graph's
output: the PyTorch model's ``pred_score``, sigmoid for multi-label, softmax for single-label), ``label`` and
``topk``. Each file is read, dequantised and cut to ``max_frames`` by
:mod:`oars_deploy.predictors.feature_classes.files` (the
code ``LoadFeatures`` runs in test mode) and packed as the exported graph takes it, so that the model input equals
the test pipeline + data preprocessor's (tests/deploy/test_vid_feature_predictor.py).

``oars-infer`` hands a model folder with a ``features`` section to :func:`run_features`: it prints
``path: name (score), ...`` per file and writes ``OUT_DIR/predictions.json`` with the video predictor's records
(``video`` is the feature file, ``total_frames`` its frames, ``frame_inds`` the frames kept). A file that cannot be
read is skipped and listed at the end (exit status 2).
"""

from __future__ import annotations

import argparse
import os
import os.path as osp

import numpy as np

from oars_deploy.backends import make_backend
from oars_deploy.clips.inputs import FEATURE_MODELS_TAKE, FEATURE_SUFFIXES, folder_contents, not_a_feature_file
from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
from oars_deploy.errors import DeployError, UserError
from oars_deploy.failures import Failures
from oars_deploy.predictors.clip_classes.cli import check_classify_args, classify_files
from oars_deploy.predictors.clip_classes.predictor import ScorePredictor
from oars_deploy.predictors.feature_classes.config import FEATURES_KEY, packed_width
from oars_deploy.predictors.feature_classes.files import FeatureFileError, load_features, read_feature_arrays
from oars_deploy.predictors.feature_classes.records import FeatureClassesRecord
from oars_deploy.records import ResultRecord


def feature_input(path: str, section: dict) -> tuple[np.ndarray, dict]:
    """Read one feature file as deploy.yaml's ``features`` section says (the export self-check calls this too).

    Args:
        path: the ``.npz`` / ``.pkl`` file.
        section: deploy.yaml's ``features`` section.

    Returns:
        (float32 [max_frames, D_1 + ... + D_k + 1]: the modalities' kept frames concatenated in the section's order,
        zero rows after them, last channel 1.0 on the kept frames and 0.0 on the padding;
        meta ``{'path', 'total_frames', 'frame_inds'}``).

    Raises:
        FeatureFileError: the file cannot be read, lacks a modality, or a modality has another width.
    """
    mods = section["modalities"]
    t = int(section["max_frames"])
    feats, inds, total = load_features(path, read_feature_arrays(path), [m["name"] for m in mods], t, True,
                                       float(section["min_quantized_value"]), float(section["max_quantized_value"]))
    packed = np.zeros((t, packed_width(section)), dtype=np.float32)
    start, n = 0, inds.size
    for m in mods:
        x = feats[m["name"]]
        if x.shape[1] != int(m["dim"]):
            raise FeatureFileError(f"{path}: {m['name']!r} features are {x.shape[1]}-wide; the model takes "
                                   f"{m['dim']}")
        packed[:n, start:start + x.shape[1]] = x
        start += x.shape[1]
    packed[:n, -1] = 1.0
    return packed, {"path": path, "total_frames": total, "frame_inds": inds}


def list_feature_files(path: str) -> list[str]:
    """``path`` itself when it is a feature file, else the feature files of the folder (sorted by name).

    Raises:
        UserError: ``path`` does not exist, is a still image or a video (said so, with what feature models take),
            or is a folder without feature files (the message says what it holds instead).
    """
    if osp.isfile(path):
        reason = not_a_feature_file(path)
        if reason is not None:
            raise UserError(reason)
        return [path]
    if not osp.isdir(path):
        raise UserError(f"input {path!r} is neither a feature file nor a folder")
    files = sorted(osp.join(path, f) for f in os.listdir(path) if f.lower().endswith(FEATURE_SUFFIXES))
    if not files:
        raise UserError(f"no feature files ({', '.join(FEATURE_SUFFIXES)}) in folder {path}: "
                        f"{folder_contents(path)}; {FEATURE_MODELS_TAKE}")
    return files


class FeaturePredictor(ScorePredictor):
    """An exported feature model: reading, dequantisation, frame selection, packing, a backend.

    Args:
        model_dir: folder with deploy.yaml and the ONNX file (tools/export.py).
        device: 'cpu' or 'cuda'. backend: 'onnxruntime' or 'tensorrt'.
    """

    what = "feature files"

    def __init__(self, model_dir: str, device: str = "cpu", backend: str = "onnxruntime") -> None:
        self.model_dir = model_dir
        self.deploy = read_deploy_yaml(osp.join(model_dir, DEPLOY_FILE))
        if FEATURES_KEY not in self.deploy:
            raise DeployError(f"{model_dir}/{DEPLOY_FILE} has no {FEATURES_KEY} section: not a feature model")
        self.labels: list[str] = list(self.deploy["labels"])
        self.section: dict = dict(self.deploy[FEATURES_KEY])
        spec = self.deploy["input"]
        self.input_name: str = spec["name"]
        self.batch_size: int | None = None if spec["shape"][0] in (-1, None) else int(spec["shape"][0])
        self.output_name: str = self.deploy["outputs"][0]["name"]
        self.backend = make_backend(backend, model_dir, self.deploy["model"], device)

    def load(self, path: str) -> tuple[np.ndarray, dict]:
        """One file -> (packed float32 [max_frames, sum D + 1], meta); see :func:`feature_input`."""
        return feature_input(path, self.section)


def run_features(args: argparse.Namespace, failures: Failures | None = None,
                 results: list[ResultRecord] | None = None) -> list[dict]:
    """``oars-infer`` on feature files: classify ``args.input`` with ``args.model_dir``; returns the records of
    predictions.json.

    Args:
        failures: where unreadable files go (None: their summary is raised at the end).
        results: when given, one :class:`~.records.FeatureClassesRecord` per file is appended.
    """
    check_classify_args(args, "feature")
    paths = list_feature_files(args.input)  # before loading the model: a wrong input is told at once
    predictor = FeaturePredictor(args.model_dir, device=args.device, backend=args.backend)
    return classify_files(predictor, paths, args, "feature files", default_batch=8, failures=failures,
                          results=results, make_record=FeatureClassesRecord.from_result)
