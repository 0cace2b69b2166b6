"""The video task's contract object (:class:`oars.tasks.Task`), registered as the ``oars.tasks`` entry point
``video``: export of clip classifiers through :mod:`video.export`, of frame-feature classifiers through
:mod:`video.export_features` (its functions choose by the config) and of temporal localisers with their
recognizer through :mod:`video.export_localizer`, inference through :mod:`video.apis`, the
``tools/convert.py videos2list`` / ``thumos2activitynet`` and the ``tools/check_videos.py`` commands. Everything
heavy is imported inside the methods.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from oars.hub.converters import register_converter
from oars.tasks import ArgumentContainer, Subcommand, Task

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.precision import CalibrationReader
    from oars.export.spec import ExportOptions, ExportSpec
    from oars_deploy.failures import Failures


class VideoTask(Task):
    """Action recognition: clips (Recognizer2D/3D) and pre-extracted frame features (FeatureRecognizer)."""

    scope = "video"

    def import_registries(self) -> None:
        """Creates the ``video`` child registries."""
        import video.registry  # noqa: F401

    def draw_pipeline_sample(self, sample: dict, dataset_meta: dict) -> object:
        """:func:`video.browse.draw_pipeline_sample` (``tools/browse_dataset.py``)."""
        from video.browse import draw_pipeline_sample

        return draw_pipeline_sample(sample, dataset_meta)

    def result_records(self, sample: object, dataset_meta: dict) -> list[dict]:
        """:func:`video.result_records.result_records` (``tools/eval.py --out``)."""
        from video.result_records import result_records

        return result_records(sample, dataset_meta)

    def export_options(self, cfg: Config, dynamic: bool, opset: int) -> ExportOptions:
        """The clip (or packed features) shape of the test pipeline: :func:`video.export.export_options`; a
        localiser's features [1, C, T]: :func:`video.export_localizer.localizer_export_options`."""
        from video.export import export_options
        from video.export_localizer import is_localizer_config, localizer_export_options

        if is_localizer_config(cfg):
            return localizer_export_options(cfg, dynamic=dynamic, opset=opset)
        return export_options(cfg, dynamic=dynamic, opset=opset)

    def preprocess_steps(self, cfg: Config) -> list[dict]:
        """Video preprocess steps (none for a feature model, nor for a localiser, whose recognizer's steps are in
        deploy.yaml's ``segments`` section): :func:`video.export.preprocess_steps`."""
        from video.export import preprocess_steps
        from video.export_localizer import is_localizer_config

        return [] if is_localizer_config(cfg) else preprocess_steps(cfg)

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
        """Temporal localisers export two FP32 ONNX graphs only
        (:func:`video.export_localizer.check_localizer_export`); the recognizer flags they need are checked when the
        spec is built (the flags reach the task there)."""
        from video.export_localizer import check_localizer_export, is_localizer_config, refuse_unexportable_localizer

        refuse_unexportable_localizer(cfg)
        if is_localizer_config(cfg):
            check_localizer_export(cfg, fmt, precision)

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """:func:`video.export.build_export_spec` (clips -> scores, with the ``sampling`` section); a localiser
        with its recognizer: :func:`video.export_segments.build_localizer_export_spec` (``video_segments``)."""
        from video.export import build_export_spec
        from video.export_localizer import is_localizer_config, refuse_localizer_flags
        from video.export_segments import build_localizer_export_spec

        if is_localizer_config(cfg):
            return build_localizer_export_spec(model, cfg, options)
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

    def clip_stream_predictor(self, model: torch.nn.Module, cfg: Config) -> Any | None:
        """Clip recognizers: :class:`video.stream_windows.TorchClipPredictor`; feature models and localisers
        (no frames to classify): None."""
        from video.export import is_feature_config

        if is_feature_config(cfg) or not hasattr(model, "cls_head"):
            return None
        from video.stream_windows import TorchClipPredictor

        return TorchClipPredictor(model, cfg)

    def infer(self, cfg: Config, weights: str, inputs: str | None, output: str, *, device: str,
              failures: Failures, args: argparse.Namespace) -> list[str]:
        """:func:`video.apis.run_inference` (top-5 per video)."""
        from video.apis import run_inference

        return run_inference(cfg, weights, inputs, output, device=device, failures=failures)

    def predict_inputs(self, model: torch.nn.Module, cfg: Config,
                       inputs: list[tuple[str, Any]]) -> tuple[str, list[dict]]:
        """``clip_classes``: per video file the top-5 result of ``tools/infer.py`` (``path``, ``topk``,
        ``total_frames``, ``frame_inds``) with its ``record`` and ``picture`` (the frame strip ``<stem>_strip.png``),
        which this plug-in does not draw per input itself."""
        import numpy as np

        from oars.errors import OarsError
        from oars.inference import build_test_pipeline
        from oars_deploy.predictors.clip_classes.records import ClipClassesRecord
        from video.apis.inference import _check_pipeline, predict_video
        from video.engine.clip_pictures import clip_frames, clip_strip
        from video.visualization import top_predictions

        if any(array is not None for _, array in inputs):
            raise OarsError("video models take video files (paths), not image arrays")
        _check_pipeline(cfg)
        pipeline = build_test_pipeline(cfg)
        classes = model.dataset_meta.get("classes") or [str(i) for i in range(model.num_classes)]
        results = []
        for path, _ in inputs:
            sample, clip = predict_video(model, pipeline, path)
            scores = sample.pred_score.detach().cpu().float().numpy()
            result = {"path": path, "topk": [(i, str(classes[i]), s) for i, s in top_predictions(scores, 5)],
                      "total_frames": sample.metainfo.get("total_frames", 0),
                      "frame_inds": np.asarray(sample.metainfo.get("frame_inds", [])).reshape(-1)}
            result["record"] = ClipClassesRecord.from_result(result)
            result["picture"] = clip_strip(sample, clip_frames(sample, clip), classes)
            results.append(result)
        return "clip_classes", results

    def subcommands(self) -> list[Subcommand]:
        """``tools/convert.py videos2list`` (:mod:`video.datasets.build_file_list`) and ``thumos2activitynet``
        (:mod:`video.converters_thumos`); ``tools/check_videos.py``;
        ``tools/extract_features.py`` (:mod:`video.features.extract`);
        ``tools/demo_data.py videos`` (the demo clips and features); ``tools/demo_data.py long-videos`` (long videos
        with timed actions, :mod:`video.demo_long_videos`)."""
        return [Subcommand("convert", "videos2list", "a folder of videos (ROOT/<class>/<video>) -> 'path label' "
                           "lists and classes.txt (MMAction2's build_file_list)", _videos2list_arguments,
                           _run_videos2list,
                           usage="python tools/convert.py videos2list --input data/myvideos/videos --out "
                                 "data/myvideos \\\n    [--level 2|1] [--split-ratio 0.8 | --split-file "
                                 "train=trainlist01.txt val=testlist01.txt] \\\n    [--classes classInd.txt] "
                                 "[--shuffle] [--seed 0] [--overwrite]",
                           check_outputs=_check_videos2list_output),
                Subcommand("convert", "thumos2activitynet", "THUMOS14 temporal annotations (<Class>_val.txt / "
                           "_test.txt) -> the ActivityNet v1.3 JSON of ActivityNetFeatureDataset",
                           _thumos_arguments, _run_thumos,
                           usage="python tools/convert.py thumos2activitynet --ann-dir DIR --out OUT.json "
                                 "[--subset validation|test] \\\n    (--videos DIR | --features-index videos.json) "
                                 "[--classes-out classes.txt] [--overwrite]",
                           check_outputs=_check_thumos_outputs),
                Subcommand("check_videos", "check_videos", "decode every video of an annotation list and list the "
                           "unreadable ones", _check_videos_arguments, _run_check_videos),
                Subcommand("extract_features", "extract_features", "snippet features of long videos from a "
                           "trained recognizer (T x C .npy per video + videos.json, for BMN)",
                           _extract_features_arguments, _run_extract_features,
                           usage="tools/extract_features.py -c RECOGNIZER_CFG -w CKPT -i VIDEOS -o OUT"),
                Subcommand("demo_data", "videos", "moving-shape clips (8 classes) with their lists and per-clip "
                           "features (python -m video.demo_data)", _demo_arguments, _run_demo,
                           usage="tools/demo_data.py videos --out data/demo_videos"),
                Subcommand("demo_data", "long-videos", "long videos of a static scene with 1-3 timed motion actions "
                           "and an ActivityNet-style JSON, for BMN (python -m video.demo_long_videos)",
                           _long_demo_arguments, _run_long_demo,
                           usage="tools/demo_data.py long-videos --out data/demo_long_videos")]


def _split_file(text: str) -> tuple[str, str]:
    from video.datasets.build_file_list import SPLIT_NAMES

    name, sep, path = text.partition('=')
    if not sep or name not in SPLIT_NAMES or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE with NAME one of {list(SPLIT_NAMES)}, got {text!r}")
    return name, path


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {value}")
    return value


def _videos2list_arguments(parser: argparse.ArgumentParser) -> None:
    from video.datasets.build_file_list import VIDEO_EXTENSIONS

    parser.add_argument("--input", required=True, help="the videos folder: ROOT/<class>/<video> (--level 2) or "
                        "ROOT/<video> (--level 1); the lists' paths are relative to it")
    parser.add_argument("--out", required=True, help="folder for <split>.txt and classes.txt (may be --input)")
    parser.add_argument("--level", type=int, choices=[1, 2], default=2,
                        help="2: class folders (default); 1: videos directly in --input, classes from --split-file")
    split = parser.add_mutually_exclusive_group()
    split.add_argument("--split-ratio", type=_ratio, default=0.8,
                       help="fraction of each class for train.txt, the rest in val.txt (default 0.8; 1: train only)")
    split.add_argument("--split-file", type=_split_file, nargs="+", default=None, metavar="NAME=FILE",
                       help="official-style splits instead: train=FILE val=FILE [test=FILE], one <class>/<video> "
                            "per line (UCF101's trainlist01.txt / testlist01.txt)")
    parser.add_argument("--classes", default=None, help="class names in label order (one per line, or UCF101's "
                        "'index name' classInd.txt; default: the sorted class folders)")
    parser.add_argument("--shuffle", action="store_true", help="shuffle each class before the ratio split and the "
                        "lines of each list")
    parser.add_argument("--seed", type=int, default=0, help="random seed for --shuffle (default 0)")
    parser.add_argument("--ext", nargs="+", default=list(VIDEO_EXTENSIONS), help="video file suffixes")
    parser.add_argument("--overwrite", action="store_true", help="replace existing list files (default: stop)")


def _split_files(args: argparse.Namespace) -> dict[str, str]:
    from oars.errors import OarsError

    files: dict[str, str] = {}
    for name, path in args.split_file or []:
        if name in files:
            raise OarsError(f"--split-file {name}= is given twice ({files[name]}, {path}); give each split once")
        files[name] = path
    return files


def _check_videos2list_output(args: argparse.Namespace) -> None:
    """Before any reading: ``--out`` is a folder, not one inside ``--input`` (it would become a class folder of the
    next run; ``--input`` itself or a folder above it is fine), and no list file replaces an input or (without
    ``--overwrite``) an existing file."""
    import os.path as osp

    from oars_deploy.output_paths import OutputPathError, check_new_file, check_output_folder
    from video.datasets.build_file_list import CLASSES_FILE

    check_output_folder(args.out, flag="--out")
    out, root = osp.realpath(args.out), osp.realpath(args.input)
    if out.startswith(root.rstrip(osp.sep) + osp.sep):
        raise OutputPathError(f"--out {args.out} is inside the videos folder --input {args.input}: it would be read "
                              "as a class folder next time; choose --input itself or a folder outside it")
    files = _split_files(args)
    names = list(files) if files else ["train", "val"] if args.split_ratio < 1 else ["train"]
    inputs = (*files.values(), *([args.classes] if args.classes else []))
    for name in [f"{n}.txt" for n in names] + [CLASSES_FILE]:
        check_new_file(osp.join(args.out, name), args.overwrite, flag="--out", inputs=inputs)


def _run_videos2list(args: argparse.Namespace) -> None:
    from video.datasets.build_file_list import build_file_lists, summary

    print(summary(build_file_lists(args.input, args.out, level=args.level, split_ratio=args.split_ratio,
                                   split_files=_split_files(args) or None, classes_file=args.classes,
                                   shuffle=args.shuffle, seed=args.seed, extensions=args.ext,
                                   overwrite=args.overwrite)))


def _thumos_arguments(parser: argparse.ArgumentParser) -> None:
    from video.converters_thumos import add_arguments

    add_arguments(parser)


def _check_thumos_outputs(args: argparse.Namespace) -> None:
    from video.converters_thumos import check_outputs

    check_outputs(args)


def _run_thumos(args: argparse.Namespace) -> None:
    from video.converters_thumos import run

    run(args)


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    from video.demo_data import add_arguments

    add_arguments(parser)


def _run_demo(args: argparse.Namespace) -> int:
    from video.demo_data import run

    return run(args)


def _long_demo_arguments(parser: argparse.ArgumentParser) -> None:
    from video.demo_long_videos import add_arguments

    add_arguments(parser)


def _run_long_demo(args: argparse.Namespace) -> int:
    from video.demo_long_videos import run

    return run(args)


def _extract_features_arguments(parser: argparse.ArgumentParser) -> None:
    from video.features.extract import add_arguments

    add_arguments(parser)


def _run_extract_features(args: argparse.Namespace) -> None:
    """Extract; a ``FolderFailuresError`` (exit status 2) lists the unreadable videos after the others are written."""
    from video.features.extract import run

    run(args)


def _check_videos_arguments(parser: argparse.ArgumentParser) -> None:
    from video.datasets.check import CHECK_BACKENDS

    parser.add_argument("list", help="annotation list: `path label ...` lines (`frame_dir total_frames label` for "
                        "rawframes)")
    parser.add_argument("--root", default="", help="folder the list's paths are relative to (default: the list's)")
    parser.add_argument("--backend", choices=CHECK_BACKENDS, default="pyav")
    parser.add_argument("--workers", type=int, default=0, help="processes decoding in parallel (default: 0, this one)")
    parser.add_argument("--filename-tmpl", default="img_{:05d}.jpg", help="frame file names (rawframes)")
    parser.add_argument("--start-index", type=int, default=1, help="number of the first frame file (rawframes)")


def _run_check_videos(args: argparse.Namespace) -> None:
    """Decode every listed file; print the report; a :class:`DataError` (exit status 2) when any cannot be read."""
    from oars.errors import DataError
    from video.datasets.check import check_video_list, format_video_report

    report = check_video_list(args.list, args.root, args.backend, args.workers, args.filename_tmpl, args.start_index)
    print(format_video_report(report))
    if report.failures:
        raise DataError(f"{len(report.failures)} of {report.num_files} file(s) in {args.list} cannot be read "
                        "(listed above); fix or remove them, or train with `on_bad_video: skip`")


TASK = VideoTask()

# Converter of torchvision's R(2+1)D-18 for the hub (``load_from: torchvision://r2plus1d_18``, oars.hub).
register_converter("torchvision_r2plus1d", "video.models.converters:convert_torchvision_r2plus1d")
