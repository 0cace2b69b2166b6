"""Run a trained segmentor over images and write colour overlays and raw label PNGs.

Memory: the logits stay at the model's resized size; :func:`segmentation.apis.labels.upsample_argmax` makes the
original-size labels one class plane at a time (the same labels as ``model.predict``), and the picture of a large
image is drawn at most ``PICTURE_MAX_SIDE`` pixels on its long side (the label PNG keeps the full size). An
8000x8000 image no longer needs C x H x W float logits, an int64 label map and three full-size panels at once.
"""

from __future__ import annotations

from mmengine.config import Config
from mmengine.structures import PixelData

from oars.pipelines.infer import infer_images
from oars.tasks import get_task
from oars_deploy.failures import Failures
from oars_deploy.predictors.semantic_labels.draw import PICTURE_MAX_SIDE, picture_inputs  # noqa: F401 (API)
from segmentation.apis.labels import upsample_argmax

ANNOTATION_LOADERS = ("LoadSegAnnotations",)


def predict_labels(model, batch: dict) -> list:
    """``model.test_step`` with the logits kept at the resized image size (``img_shape``), then each sample's
    ``pred_sem_seg`` made at its original size by :func:`upsample_argmax` (``seg_logits`` stays small)."""
    original = [s.ori_shape for s in batch["data_samples"]]
    for sample in batch["data_samples"]:
        sample.set_metainfo({"ori_shape": sample.img_shape})
    samples = model.test_step(batch)
    for sample, shape in zip(samples, original):
        sample.set_metainfo({"ori_shape": shape})
        label = upsample_argmax(sample.seg_logits.data, shape[:2], getattr(model, "align_corners", False))
        sample.pred_sem_seg = PixelData(data=label[None])
    return samples


def run_inference(cfg: Config, checkpoint: str, inputs: str, out_dir: str, device: str = "cpu",
                  failures: Failures | None = None) -> list[str]:
    """Predict every image under ``inputs``; writes ``<stem>_vis.png`` (image | prediction | overlay,
    with a legend), ``<stem>.png`` (class ids) and ``results.jsonl`` (one
    :class:`oars_deploy.predictors.semantic_labels.records.SemanticLabelsRecord` per image, as oars-infer writes it);
    returns the picture paths.

    ``<stem>`` is the name oars-infer gives the same file (:func:`oars_deploy.output_paths.output_stems` with the
    deployed predictor's own file names): the file's stem, or ``x_png`` / ``x_jpg`` for ``x.png`` beside ``x.jpg``
    (one label map would otherwise replace the other); a name that still collides is refused before the model is
    loaded (:class:`oars_deploy.output_paths.OutputPathError`, naming both inputs).

    An image that cannot be read is skipped and recorded in ``failures``; without ``failures`` their summary is
    raised (:class:`oars_deploy.failures.FolderFailuresError`) after everything readable was written.
    """
    run = infer_images(get_task("segmentation"), cfg, checkpoint, inputs, out_dir, device=device, failures=failures)
    return run.pictures
