"""Run a trained detector over images and write pictures with boxes (and instance masks) plus a JSON of detections:
the checkpoint through the runtime plug-in's loop (:func:`oars.pipelines.infer.infer_images`), as ``oars-infer``
runs an export."""

from __future__ import annotations

from mmengine.config import Config

from oars.pipelines.infer import infer_images
from oars.tasks import get_task
from oars_deploy.failures import Failures

ANNOTATION_LOADERS = ("LoadAnnotations",)


def run_inference(cfg: Config, checkpoint: str, inputs: str, out_dir: str, device: str = "cpu",
                  draw_threshold: float = 0.3, failures: Failures | None = None) -> list[str]:
    """Predict every image under ``inputs``; writes ``<stem>_vis.png`` (boxes with class names and scores
    at or above ``draw_threshold``, instance masks filled in the class colour for mask models) and
    ``detections.json`` (every kept detection, original pixels, xyxy; masks as RLE) and ``results.jsonl`` (one
    :class:`oars_deploy.predictors.detection_boxes.records.DetectionBoxesRecord` / ``InstanceMasksRecord`` per image,
    as oars-infer writes it).

    ``<stem>`` is the name oars-infer gives the same file (:func:`oars_deploy.output_paths.output_stems` with the
    deployed predictor's own file names): the file's stem, or ``x_png`` / ``x_jpg`` for ``x.png`` beside ``x.jpg``
    (one picture would otherwise replace the other); a name that still collides is refused before the model is
    loaded (:class:`oars_deploy.output_paths.OutputPathError`, naming both inputs).

    An image that cannot be read is skipped and recorded in ``failures``; without ``failures`` their summary is
    raised (:class:`oars_deploy.failures.FolderFailuresError`) after everything readable was written. Returns the
    pictures' paths.
    """
    run = infer_images(get_task("detection"), cfg, checkpoint, inputs, out_dir, device=device,
                       flags={"draw_threshold": draw_threshold}, failures=failures)
    return run.pictures
