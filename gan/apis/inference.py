"""tools/infer.py for GAN configs: the deployed predictor's outputs, computed with PyTorch.

The model runs as the exported graph does (:class:`gan.export.GeneratorGraph`: the EMA generator when present,
normalisation and denormalisation around it) on the numbers the predictor feeds it (deploy.yaml's resize and RGB
steps, numpy-seeded noise, ``--attrs`` parsed by the same function), and the same files are written with the same
helpers (oars_deploy.predictors.gan_images.cli), with the same results.jsonl records, so tools/infer.py and
oars-infer can be compared
image by image.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from mmengine.config import Config

from gan.export import build_export_spec, export_options, preprocess_steps
from oars.inference import check_output_folder
from oars.pipelines.model import init_model
from oars_deploy.errors import DeployError
from oars_deploy.failures import Failures
from oars_deploy.image_files import list_images
from oars_deploy.output_paths import output_stems
from oars_deploy.outputs import read_image
from oars_deploy.predictors.gan_images.cli import (
    DEFAULT_NUM,
    TRANSLATION_NAMES,
    attribute_vectors,
    check_gan_args,
    noise_records,
    translation_record,
    write_samples,
    write_translation,
)
from oars_deploy.predictors.gan_images.config import make_labels, make_noise, to_bgr_images
from oars_deploy.predictors.gan_images.records import GANImagesRecord
from oars_deploy.preprocess import preprocess_one
from oars_deploy.records import write_results

BATCH = 8


def run_inference(cfg: Config, checkpoint: str, inputs: str | None, out_dir: str, device: str = "cpu",
                  failures: Failures | None = None, attrs: str | None = None, src_attrs: str | None = None,
                  seed: int = 0, num: int | None = None, label: int | None = None) -> list[str]:
    """Generate (noise models: ``seed``/``num``/``label``; ``inputs`` must be None) or translate every image under
    ``inputs`` (``attrs``/``src_attrs`` as ``"Black_Hair=1,Male=0"`` for attribute models); returns the written
    paths (noise: ``sample_XXX.png`` + ``grid.png``; images: ``<stem>.png`` + ``<stem>_pair.png``); also writes
    ``results.jsonl`` (one ``oars_deploy.records.GANImagesRecord`` per sample / image, as oars-infer does).

    ``<stem>`` is the name oars-infer gives the same file (:func:`oars_deploy.output_paths.output_stems` with
    ``TRANSLATION_NAMES``): the file's stem, or ``x_png`` / ``x_jpg`` for ``x.png`` beside ``x.jpg`` (one output
    would otherwise replace the other); a name that still collides (``x_pair.png`` beside ``x.png``) is refused
    before any image is read (:class:`oars_deploy.output_paths.OutputPathError`, naming both inputs).

    An image that cannot be read is skipped and recorded in ``failures``; without ``failures`` their summary is
    raised after everything readable was written.
    """
    check_output_folder(out_dir, inputs)
    own = failures is None
    failures = Failures() if own else failures
    model = init_model(cfg, checkpoint, device)
    spec = build_export_spec(model, cfg, export_options(cfg))
    gan = spec.deploy_sections["gan"]
    args = argparse.Namespace(input=inputs, attrs=attrs, src_attrs=src_attrs, num=num, label=label,
                              draw_threshold=None)
    check_gan_args(args, gan)

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        with torch.no_grad():
            out = spec.module(*[torch.from_numpy(feeds[n]).to(device) for n in spec.graph_inputs])
        return to_bgr_images(out.cpu().numpy())

    if gan["kind"] == "noise":
        n = DEFAULT_NUM if num is None else num
        feeds = {"noise": make_noise(seed, n, gan["z_dim"])}
        if "label" in spec.graph_inputs:
            feeds["label"] = make_labels(label, n, gan["num_classes"], gan.get("class_names", ()))
        images = [img for s in range(0, n, BATCH) for img in run({k: v[s:s + BATCH] for k, v in feeds.items()})]
        written = write_samples(images, out_dir)
        write_results(noise_records(written, seed, feeds.get("label"), gan), out_dir)
        return written
    attr_vec, src_vec = attribute_vectors(gan, attrs, src_attrs)
    vectors = {k: v for k, v in (("attrs", attr_vec), ("src_attrs", src_vec)) if v is not None}
    steps = preprocess_steps(cfg, gan["input_size"])
    paths = list_images(inputs)
    stems = output_stems(paths, TRANSLATION_NAMES)  # x.png beside x.jpg: x_png.png and x_jpg.png, not one x.png
    written: list[str] = []
    results: list[GANImagesRecord] = []
    for start in range(0, len(paths), BATCH):
        kept, arrays = [], []
        for path in paths[start:start + BATCH]:
            try:
                arrays.append(preprocess_one(read_image(path), steps)[0][None])
                kept.append(path)
            except DeployError as err:
                failures.add(path, str(err))
        if not arrays:
            continue
        x = np.concatenate(arrays)
        feeds = {"image": x, **{k: np.repeat(v[None], len(x), axis=0) for k, v in vectors.items()}}
        for path, shown, out in zip(kept, to_bgr_images(x), run(feeds)):
            pair = write_translation(path, shown, out, out_dir, stems[path])
            results.append(translation_record(path, pair, attr_vec, src_vec, gan))
            written += pair
    write_results(results, out_dir)
    if own:
        failures.raise_if_any(total=len(paths))
    return written



