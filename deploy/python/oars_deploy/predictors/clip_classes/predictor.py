"""Classify video files with an exported clip classifier (deploy.yaml with a ``sampling`` section), without torch.

``VideoPredictor(model_dir).predict([path, ...])`` -> one dict per video: ``scores`` float32 [C] (the class
probabilities the graph outputs: the PyTorch model's ``pred_score``), ``label`` (argmax class id) and ``topk``
[(class id, name, score), ...]. Each video is decoded (:mod:`oars_deploy.clips.decode`), sampled
(:mod:`oars_deploy.clips.sampling`) and preprocessed (:mod:`oars_deploy.clips.preprocess`) as the test pipeline
and the data preprocessor do, so the model input equals evaluation's (tests/deploy/test_vid_predictor.py).
"""

from __future__ import annotations

import os.path as osp
from collections.abc import Sequence

import numpy as np

from oars_deploy.backends import make_backend
from oars_deploy.clips.decode import VideoFile
from oars_deploy.clips.preprocess import preprocess_clip
from oars_deploy.clips.sampling import check_frame_count, sampled_frame_indices
from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
from oars_deploy.errors import DeployError
from oars_deploy.predictors.clip_classes.config import views_per_video

DEFAULT_TOPK = 5


def topk(scores: np.ndarray, k: int) -> list[int]:
    """Class ids of the ``k`` highest scores, highest first; ties go to the lower class id (as argmax and the
    accuracy metric do)."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return [int(i) for i in order[:max(1, int(k))]]


def video_input(path: str, sampling: dict, steps: list[dict]) -> tuple[np.ndarray, dict]:
    """Decode, sample and preprocess one video as deploy.yaml says (the export self-check calls this too).

    Args:
        path: the video file.
        sampling: deploy.yaml's ``sampling`` section.
        steps: its video ``preprocess`` steps.

    Returns:
        (float32 [V*T, 3, H, W] (NCHW) or [V, 3, T, H, W] (NCTHW), meta ``{'path', 'total_frames', 'frame_inds'}``).

    Raises:
        DeployError: the file is not a decodable video (a still image included), or it has fewer frames than
            the sampling's ``min_frames``.
    """
    with VideoFile(path) as video:
        check_frame_count(path, video.total_frames, sampling, DeployError)
        inds = sampled_frame_indices(video.total_frames, sampling)
        frames = video.frames(inds)
        total = video.total_frames
    clips = int(sampling["num_clips"]) * (2 if sampling.get("twice_sample") else 1)
    clip = preprocess_clip(frames, steps, clips, int(sampling["clip_len"]))
    return clip, {"path": path, "total_frames": total, "frame_inds": inds}


class ScorePredictor:
    """What the video and the feature-file predictors share once a file is loaded: running the backend in chunks
    of a static batch, and the top-k result. Subclasses set ``input_name``, ``output_name``, ``batch_size``,
    ``labels``, ``backend`` and define ``load(path) -> (input, meta)``."""

    what = "files"

    def infer(self, batch: np.ndarray) -> np.ndarray:
        """Class scores float32 [N, C] of a batch of inputs [N, ...]; a static-batch model runs in chunks of its
        batch (the last filled up with copies of its last input, their outputs dropped)."""
        size = self.batch_size or batch.shape[0]
        parts = []
        for start in range(0, batch.shape[0], size):
            chunk = batch[start:start + size]
            real = chunk.shape[0]
            if real < size:
                chunk = np.concatenate([chunk] + [chunk[-1:]] * (size - real))
            parts.append(self.backend({self.input_name: chunk})[self.output_name][:real])
        return np.concatenate(parts)

    def predict(self, paths: Sequence[str], k: int = DEFAULT_TOPK) -> list[dict]:
        """Files -> one ``{'path', 'scores' [C], 'label', 'topk': [(id, name, score)], 'total_frames',
        'frame_inds'}`` per file."""
        if not paths:
            raise DeployError(f"predict: no {self.what} given")
        loaded = [self.load(p) for p in paths]
        scores = self.infer(np.stack([x for x, _ in loaded]))
        return [self.result(meta, row, k) for (_, meta), row in zip(loaded, scores)]

    def result(self, meta: dict, scores: np.ndarray, k: int = DEFAULT_TOPK) -> dict:
        """One file's result dict from its meta and score row [C]."""
        ids = topk(scores, k)
        return {**meta, "scores": scores, "label": ids[0],
                "topk": [(i, self.labels[i], float(scores[i])) for i in ids]}


class VideoPredictor(ScorePredictor):
    """An exported video model: decoding, sampling, preprocessing, a backend.

    Args:
        model_dir: folder with deploy.yaml and the ONNX file (tools/export.py).
        device: 'cpu' or 'cuda'. backend: 'onnxruntime' or 'tensorrt'.
    """

    what = "videos"

    def __init__(self, model_dir: str, device: str = "cpu", backend: str = "onnxruntime") -> None:
        self.model_dir = model_dir
        self.deploy = read_deploy_yaml(osp.join(model_dir, DEPLOY_FILE))
        if "sampling" not in self.deploy:
            raise DeployError(f"{model_dir}/{DEPLOY_FILE} has no sampling section: not a video model")
        self.task = self.deploy["model"]["task"]
        self.labels: list[str] = list(self.deploy["labels"])
        self.sampling: dict = dict(self.deploy["sampling"])
        self.steps: list[dict] = list(self.deploy["preprocess"])
        spec = self.deploy["input"]
        self.input_name: str = spec["name"]
        self.output_name: str = self.deploy["outputs"][0]["name"]
        self.input_shape: list[int] = list(spec["shape"])
        self.batch_size: int | None = None if self.input_shape[0] in (-1, None) else int(self.input_shape[0])
        self.num_views = views_per_video(self.sampling, self.steps)
        self.backend = make_backend(backend, model_dir, self.deploy["model"], device)

    def load(self, path: str) -> tuple[np.ndarray, dict]:
        """One video -> (its model input float32 ``input.shape[1:]``, meta with ``total_frames``, ``frame_inds``).

        Raises:
            DeployError: the file cannot be decoded, or the preprocessed clip does not have the model's shape.
        """
        clip, meta = video_input(path, self.sampling, self.steps)
        want = tuple(self.input_shape[1:])
        if clip.size != int(np.prod(want)) or -1 in want:
            raise DeployError(f"{self.model_dir}/{DEPLOY_FILE}: preprocessing gives a clip of shape "
                              f"{list(clip.shape)}, the model takes {list(want)} per video")
        return clip.reshape(want), meta

