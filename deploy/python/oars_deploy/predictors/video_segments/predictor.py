"""Timed action segments of video files from an exported localiser + recognizer (``predictor: video_segments``),
without torch.

Per video (:meth:`SegmentsPredictor.predict`): the file is decoded with PyAV (:mod:`oars_deploy.clips.decode`) chunk
by chunk of snippets (``batch_size`` snippets' frames at a time, front to back: each chunk seeks to the keyframe at
or before its first frame and decodes forward), never whole; each snippet is sampled and preprocessed as the
recognizer's test pipeline takes a clip (:mod:`oars_deploy.clips.sampling`, :mod:`oars_deploy.clips.preprocess`, the
frames of :mod:`.segments.snippets`); the recognizer graph gives its pooled features and class
probabilities, which makes the T x C feature sequence (what ``tools/extract_features.py`` writes) and the video's
class scores (their mean); the sequence is resized to ``tscale`` (:mod:`.segments.temporal`), the
localiser graph gives the boundary probabilities and the BM map, and :mod:`.segments` turns them into
proposals, Soft-NMS and detections (proposals x the top-k classes) in seconds -- the NumPy code ``BMN.predict`` runs
too. A C-TCN export (``segments.localizer: ctcn``) gives per-anchor offsets and class scores instead, decoded with
the export's ``anchors.npy``, per-class NMS and Soft-NMS (:mod:`.segments.ctcn_decode`, the code
``CTCN.predict`` runs): its segments carry C-TCN's own classes, so there are no video-level classes to pair.
"""

from __future__ import annotations

import os.path as osp

import numpy as np

from oars_deploy.backends import make_backend
from oars_deploy.clips.decode import VideoFile
from oars_deploy.clips.preprocess import preprocess_clip
from oars_deploy.clips.sampling import check_frame_count, sampled_frame_indices
from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
from oars_deploy.errors import DeployError
from oars_deploy.predictors.video_segments.config import SECTION, localizer_of
from oars_deploy.predictors.video_segments.segments import (
    bmn_proposals,
    combine_classes,
    feature_seconds,
    proposals_in_seconds,
    resize_temporal,
    snippet_indices,
    soft_nms,
    top_classes,
)
from oars_deploy.predictors.video_segments.segments.ctcn_decode import ctcn_segments

DEFAULT_BATCH = 16  # snippets per recognizer run (and per decoded chunk of frames)
STRIP_FRAMES = 10  # frames of the timeline picture's strip


class SegmentsPredictor:
    """An exported localiser with its recognizer: decoding, snippets, two backends, post-processing.

    Args:
        model_dir: folder with deploy.yaml, model.onnx (localiser) and the recognizer's ONNX file.
        device: 'cpu' or 'cuda'. backend: 'onnxruntime' (the only one: no TensorRT engines are exported).
        batch_size: snippets per recognizer run (default :data:`DEFAULT_BATCH`).
    """

    def __init__(self, model_dir: str, device: str = "cpu", backend: str = "onnxruntime",
                 batch_size: int | None = None) -> None:
        self.model_dir = model_dir
        self.deploy = read_deploy_yaml(osp.join(model_dir, DEPLOY_FILE))
        if SECTION not in self.deploy:
            raise DeployError(f"{model_dir}/{DEPLOY_FILE} has no {SECTION} section: not a temporal localiser")
        if backend != "onnxruntime":
            raise DeployError(f"--backend {backend}: a temporal localiser export holds ONNX graphs only; use "
                              "--backend onnxruntime")
        self.labels: list[str] = list(self.deploy["labels"])
        seg = self.deploy[SECTION]
        self.seg, self.rec = seg, seg["recognizer"]
        self.batch_size = int(batch_size or DEFAULT_BATCH)
        self.views = int(self.rec["sampling"]["num_clips"]) * (2 if self.rec["sampling"].get("twice_sample") else 1)
        self.clip_shape = tuple(int(v) for v in self.rec["input"]["shape"][1:])
        self.localizer = make_backend(backend, model_dir, self.deploy["model"], device)
        self.recognizer = make_backend(backend, model_dir, {"onnx": self.rec["onnx"]}, device)
        self.input_name = self.deploy["input"]["name"]
        self.kind = localizer_of(seg)
        self.anchors = self._anchors() if self.kind == "ctcn" else None

    def _anchors(self) -> np.ndarray:
        """C-TCN's anchors (float [A, 2] centre, width) from the file deploy.yaml names, checked against
        ``num_anchors``."""
        path = osp.join(self.model_dir, self.seg["anchors"])
        try:
            anchors = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise DeployError(f"{path}: the C-TCN anchors ({SECTION}.anchors of {DEPLOY_FILE}) cannot be read: "
                              f"{err}") from None
        if anchors.shape != (int(self.seg["num_anchors"]), 2) or not np.issubdtype(anchors.dtype, np.floating):
            raise DeployError(f"{path}: expected float anchors [{self.seg['num_anchors']}, 2] (centre, width), got "
                              f"{anchors.dtype} {list(anchors.shape)}")
        return anchors

    # ------------------------------------------------------------------------------------------ recognizer side
    def _clip(self, frames: list[np.ndarray]) -> np.ndarray:
        sampling = self.rec["sampling"]
        clip = preprocess_clip(frames, self.rec["preprocess"], self.views, int(sampling["clip_len"]))
        if clip.size != int(np.prod(self.clip_shape)):
            raise DeployError(f"{self.model_dir}/{DEPLOY_FILE}: preprocessing gives a clip of shape "
                              f"{list(clip.shape)}, the recognizer takes {list(self.clip_shape)} per snippet")
        return clip.reshape(self.clip_shape)

    def snippet_outputs(self, path: str) -> tuple[np.ndarray, np.ndarray, dict]:
        """Every snippet's features and class probabilities.

        Args:
            path: the video file.

        Returns:
            (float32 [T, C] features, float32 [T, K] class probabilities, meta ``{'total_frames', 'fps',
            'duration_second', 'feature_second', 'num_snippets', 'strip'}``: ``strip`` the timeline picture's
            frames, BGR uint8, evenly spaced over the video).

        Raises:
            DeployError: the file is not a decodable video, has no frame rate, or is too short for the sampling.
        """
        snippet, stride = int(self.seg["snippet"]), int(self.seg["stride"])
        sampling = self.rec["sampling"]
        feats, probs = [], []
        with VideoFile(path) as video:
            total, fps = int(video.total_frames), float(video.avg_fps)
            if not fps > 0:
                raise DeployError(f"{path}: the video states no frame rate; segment times cannot be given in seconds")
            window = min(snippet, total)
            check_frame_count(path, window, sampling, DeployError)
            indices = snippet_indices(sampled_frame_indices(window, sampling), total, snippet, stride)
            for first in range(0, len(indices), self.batch_size):
                rows = indices[first:first + self.batch_size]
                wanted = np.unique(rows)
                decoded = dict(zip(wanted.tolist(), video.frames(wanted)))  # one forward run per chunk
                batch = np.stack([self._clip([decoded[i] for i in row.tolist()]) for row in rows])
                out = self.recognizer({self.rec["input"]["name"]: batch})
                feats.append(out[self.rec["features"]])
                probs.append(out[self.rec["scores"]])
            strip_inds = np.minimum(((np.arange(STRIP_FRAMES) + 0.5) / STRIP_FRAMES * total).astype(np.int64),
                                    total - 1)
            strip = video.frames(strip_inds)
        duration = total / fps
        meta = {"total_frames": total, "fps": fps, "duration_second": duration, "num_snippets": len(indices),
                "feature_second": feature_seconds(len(indices), stride, total, duration), "strip": strip}
        return (np.concatenate(feats).astype(np.float32, copy=False),
                np.concatenate(probs).astype(np.float32, copy=False), meta)

    # ------------------------------------------------------------------------------------------- localiser side
    def localize(self, features: np.ndarray, class_scores: np.ndarray,
                 seconds: float) -> tuple[np.ndarray, np.ndarray]:
        """A video's feature sequence -> (proposals float [P, 3] start_s, end_s, score; detections float [M, 4]
        start_s, end_s, score, class id by decreasing score). BMN: proposals after Soft-NMS, detections = each
        proposal x the top-k classes; C-TCN: its decoded detections, proposals their first ``max_proposals``
        without the class (as ``CTCN.predict``).

        Args:
            features: float [T, C] snippet features. class_scores: float [K] video-level probabilities (BMN only).
            seconds: the span the features cover (``feature_second``).
        """
        seg = self.seg
        x = resize_temporal(features, int(seg["tscale"]), bool(seg.get("align_corners", False))).T[None]
        out = self.localizer({self.input_name: np.ascontiguousarray(x, dtype=np.float32)})
        if self.kind == "ctcn":
            dec = dict(seg["decode"])
            detections = ctcn_segments(out["offsets"][0], out["probs"][0], self.anchors, seconds,
                                       dec.pop("variances"), **dec)
            return detections[: int(seg["max_proposals"]), :3].copy(), detections
        candidates = bmn_proposals(out["start"][0], out["end"][0], out["confidence"][0])
        nms = seg["soft_nms"]
        kept = soft_nms(candidates, float(nms["alpha"]), float(nms["low_threshold"]), float(nms["high_threshold"]),
                        int(nms["top_k"]))[: int(seg["max_proposals"])]
        proposals = proposals_in_seconds(kept, seconds)
        return proposals, combine_classes(proposals, class_scores, int(seg["top_k"]))

    def predict(self, path: str) -> dict:
        """One video -> ``{'path', 'features' [T, C], 'class_scores' [K], 'classes' (top-k ids; none for a C-TCN,
        whose segments name their classes), 'proposals' [P, 3], 'detections' [M, 4], and the meta of
        :meth:`snippet_outputs`}``."""
        features, probs, meta = self.snippet_outputs(path)
        class_scores = probs.mean(axis=0)
        proposals, detections = self.localize(features, class_scores, meta["feature_second"])
        classes = np.zeros(0, dtype=np.int64) if self.kind == "ctcn" else top_classes(class_scores,
                                                                                       int(self.seg["top_k"]))
        return {"path": path, "features": features, "class_scores": class_scores, "proposals": proposals,
                "classes": classes, "detections": detections, **meta}
