"""The video task's contract object (:class:`oars.tasks.Task`), registered as the ``oars.tasks`` entry point
``video``: three kinds of model, each with its own roles, so no hook branches on a config's kind:

- temporal localisers (BMN, C-TCN; :func:`video.export_localizer.is_localizer_config`), exported with their
  recognizer through :mod:`video.export_localizer` / :mod:`video.export_segments`;
- frame-feature classifiers (:func:`video.export_features.is_feature_config`), exported through
  :mod:`video.export_features`;
- clip recognisers (Recognizer2D/3D, the default kind), exported through :mod:`video.export`, also predicting clip
  windows of a stream.

All predict through :mod:`video.apis`; the commands are in :mod:`video.commands`. Everything heavy is imported inside
the methods.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from oars.tasks import ArgumentContainer, Data, Exporter, ModelKind, Predictor, Task
from video.commands import VideoCommands

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.precision import CalibrationReader
    from oars.export.spec import ExportOptions, ExportSpec
    from oars_deploy.failures import Failures


class VideoData(Data):
    """Browse pictures and ``--out`` records of every video model."""

    def draw_pipeline_sample(self, sample: dict, dataset_meta: dict) -> object:
        """:func:`video.browse.draw_pipeline_sample` (``tools/browse_dataset.py``)."""
        from video.browse import draw_pipeline_sample

        return draw_pipeline_sample(sample, dataset_meta)

    def result_records(self, sample: object, dataset_meta: dict) -> list[dict]:
        """:func:`video.result_records.result_records` (``tools/eval.py --out``)."""
        from video.result_records import result_records

        return result_records(sample, dataset_meta)

    description_formats = ("video_list",)

    def dataset_from_description(self, description: Any, split: str) -> dict | None:
        """``--data``: ``video_list`` (a split is a text file of ``path label`` lines, paths relative to root)
        -> ``VideoDataset`` (clip recognisers). ``classes``: the description's ``names`` (a list or a text file with
        one name a line; None: the labels are class indices)."""
        if description.format != "video_list":
            return None
        return {"type": "VideoDataset", "data_root": description.root,
                "ann_file": description.resolve(split, description.split(split)), "classes": description.names}


class VideoExporter(Exporter):
    """Clip recognisers' export (:mod:`video.export`) and the evaluation of every video export with
    ``--model-dir``; the feature classifier's and the localiser's exporters extend it. The task's export flags
    (a localiser's recognizer and snippets) are every video kind's, so a clip model given one is told why."""

    def export_options(self, cfg: Config, dynamic: bool, opset: int) -> ExportOptions:
        """The clip (or packed features) shape of the test pipeline: :func:`video.export.export_options`."""
        from video.export import export_options

        return export_options(cfg, dynamic=dynamic, opset=opset)

    def preprocess_steps(self, cfg: Config) -> list[dict]:
        """Video preprocess steps (none for a feature model): :func:`video.export.preprocess_steps`."""
        from video.export import preprocess_steps

        return preprocess_steps(cfg)

    def export_arguments(self, parser: ArgumentContainer) -> None:
        """A temporal localiser's recognizer and snippets (:mod:`video.export_localizer`)."""
        parser.add_argument("--recognizer-config", default=None, help="localisers (BMN, C-TCN): the config of the "
                            "recognizer that extracted the features (tools/extract_features.py -c)")
        parser.add_argument("--recognizer-weights", default=None, help="localisers: its checkpoint")
        parser.add_argument("--snippet", type=int, default=None, help="localisers: frames per snippet, as "
                            "tools/extract_features.py --snippet (default: its default for the recognizer)")
        parser.add_argument("--stride", type=int, default=None, help="localisers: frames between snippets, as "
                            "tools/extract_features.py --stride (default: the snippet)")
        parser.add_argument("--top-k", type=int, default=None, help="BMN: video-level classes paired with each "
                            "proposal (default: model.classify.top_k, else 2 as ActivityNet; not C-TCN: own classes)")

    def check_export(self, cfg: Config, fmt: str, precision: str) -> None:
        """A localiser type that cannot be exported is refused (:func:`video.export_localizer.
        refuse_unexportable_localizer`)."""
        from video.export_localizer import refuse_unexportable_localizer

        refuse_unexportable_localizer(cfg)

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """:func:`video.export.build_export_spec` (clips -> scores, with the ``sampling`` section); a localiser's
        flags are refused, naming them."""
        from video.export import build_export_spec
        from video.export_localizer import refuse_localizer_flags

        refuse_localizer_flags(cfg, options)
        return build_export_spec(model, cfg, options)

    def calibration_reader(self, cfg: Config, options: ExportOptions) -> CalibrationReader | None:
        """``--int8 --calib-dir VIDEOS`` of a clip classifier: the videos decoded, sampled and pre-processed by the
        runtime predictor's code, ``export.calib_clips`` clips each
        (:class:`video.export_calibration.VideoCalibrationReader`); None (INT8 refused) for feature models."""
        from video.export_calibration import calibration_reader

        return calibration_reader(cfg, options)

    # ------------------------------------------------------------------------------ tools/eval.py --model-dir
    evaluates_exports = True

    def export_predictor(self, model_dir: str, device: str, backend: str, model_cfg: dict | None = None) -> Any:
        """``oars-infer``'s predictor of the export: clip or feature classifiers
        (:func:`video.export.export_predictor`; a localiser's export is refused, naming it)."""
        from video.export import export_predictor

        return export_predictor(model_dir, device, backend)

    def export_inputs(self, samples: list[Any], inputs: Any = None) -> list[str]:
        """Each test sample's file (``filename``: the video, or the feature file), as ``oars-infer`` is given it."""
        from oars.errors import OarsError

        paths = [sample.metainfo.get("filename") for sample in samples]
        if not all(isinstance(p, str) and p for p in paths):
            raise OarsError("--model-dir: a test sample has no filename; the export is evaluated on the video (or "
                            "feature) files, so the test dataset must list them (VideoDataset, FeatureDataset)")
        return paths

    def prediction_from_export(self, result: dict, sample: Any) -> None:
        """``pred_score`` (float32 [C]: the graph's class probabilities, views averaged as in PyTorch) and
        ``pred_label`` (int64 [1], its argmax), the fields the accuracy metrics read."""
        import torch

        scores = torch.as_tensor(result["scores"], dtype=torch.float32).reshape(-1)
        sample.pred_score = scores
        sample.pred_label = scores.argmax(dim=0, keepdim=True)


class FeatureExporter(VideoExporter):
    """A frame-feature classifier: packed features in, class scores out (:mod:`video.export_features`); deploy.yaml's
    ``features`` section says how files are read, so no ``preprocess`` steps, and no INT8 calibration data."""

    def export_options(self, cfg: Config, dynamic: bool, opset: int) -> ExportOptions:
        """:func:`video.export_features.feature_export_options`."""
        from video.export_features import feature_export_options

        return feature_export_options(cfg, dynamic, opset)

    def preprocess_steps(self, cfg: Config) -> list[dict]:
        """None: the ``features`` section says how the files are read."""
        return []

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """:func:`video.export_features.build_feature_export_spec`; a localiser's flags are refused."""
        from video.export_features import build_feature_export_spec
        from video.export_localizer import refuse_localizer_flags

        refuse_localizer_flags(cfg, options)
        return build_feature_export_spec(model, cfg, options)

    def calibration_reader(self, cfg: Config, options: ExportOptions) -> CalibrationReader | None:
        """None: INT8 is refused for feature models."""
        return None


class LocaliserExporter(VideoExporter):
    """A temporal localiser exported with its recognizer: two FP32 ONNX graphs, deploy.yaml's ``segments``."""

    def export_options(self, cfg: Config, dynamic: bool, opset: int) -> ExportOptions:
        """The localiser's features [1, C, T]: :func:`video.export_localizer.localizer_export_options`."""
        from video.export_localizer import localizer_export_options

        return localizer_export_options(cfg, dynamic=dynamic, opset=opset)

    def preprocess_steps(self, cfg: Config) -> list[dict]:
        """None in deploy.yaml's ``preprocess``: the recognizer's steps are in its ``segments`` section."""
        return []

    def check_export(self, cfg: Config, fmt: str, precision: str) -> None:
        """Two FP32 ONNX graphs only (:func:`video.export_localizer.check_localizer_export`); the recognizer flags
        they need are checked when the spec is built (the flags reach the exporter there)."""
        from video.export_localizer import check_localizer_export

        super().check_export(cfg, fmt, precision)
        check_localizer_export(cfg, fmt, precision)

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """:func:`video.export_segments.build_localizer_export_spec` (``video_segments``)."""
        from video.export_segments import build_localizer_export_spec

        return build_localizer_export_spec(model, cfg, options)


class VideoPredictor(Predictor):
    """``tools/infer.py`` and ``oars.Model.predict`` of every video model (one result per video file)."""

    def infer(self, cfg: Config, weights: str, inputs: str | None, output: str, *, device: str,
              failures: Failures, args: argparse.Namespace) -> list[str]:
        """:func:`video.apis.run_inference` (top-5 per video)."""
        from video.apis import run_inference

        return run_inference(cfg, weights, inputs, output, device=device, failures=failures)

    def predict(self, model: torch.nn.Module, cfg: Config, inputs: list[tuple[str, Any]]) -> tuple[str, list[dict]]:
        """``clip_classes``: per video file the top-5 result of ``tools/infer.py`` (``path``, ``topk``,
        ``total_frames``, ``frame_inds``) with its ``record`` and ``picture`` (the frame strip ``<stem>_strip.png``),
        which this plug-in does not draw per input itself."""
        from oars.errors import OarsError
        from oars.inference import build_test_pipeline
        from video.apis.inference import check_pipeline, classify_video

        if any(array is not None for _, array in inputs):
            raise OarsError("video models take video files (paths), not image arrays")
        check_pipeline(cfg)
        pipeline = build_test_pipeline(cfg)
        classes = model.dataset_meta.get("classes") or [str(i) for i in range(model.num_classes)]
        results = [classify_video(model, pipeline, classes, path) for path, _ in inputs]
        return "clip_classes", results


class ClipPredictor(VideoPredictor):
    """A clip recogniser also classifies a stream window by window (``tools/infer.py --window N``)."""

    def runtime_predictor(self, model: torch.nn.Module, cfg: Config) -> Any | None:
        """:class:`video.stream_windows.TorchClipPredictor` (None for a model without a ``cls_head``)."""
        if not hasattr(model, "cls_head"):
            return None
        from video.stream_windows import TorchClipPredictor

        return TorchClipPredictor(model, cfg)


def _is_localiser(cfg: Any) -> bool:
    from video.export_localizer import is_localizer_config

    return is_localizer_config(cfg)


def _is_features(cfg: Any) -> bool:
    from video.export_features import is_feature_config

    return is_feature_config(cfg)


_DATA, _PREDICTOR = VideoData(), VideoPredictor()  # shared by the kinds


class VideoTask(Task):
    """Action recognition (clips, pre-extracted frame features) and temporal action localisation."""

    scope = "video"
    kinds = (ModelKind("clip recogniser", VideoExporter(), ClipPredictor(), _DATA),
             ModelKind("temporal localiser", LocaliserExporter(), _PREDICTOR, _DATA, when=_is_localiser),
             ModelKind("feature classifier", FeatureExporter(), _PREDICTOR, _DATA, when=_is_features))
    commands = VideoCommands()
    metric_aliases = {"top1": "acc/top1", "top5": "acc/top5", "auc": "localization/AUC"}

    def import_registries(self) -> None:
        """Creates the ``video`` child registries."""
        import video.registry  # noqa: F401


TASK = VideoTask()
