"""A generator export evaluated like its checkpoint: ``tools/eval.py -c CFG --model-dir EXPORT_DIR`` on a GAN.

Why not the image path of the other tasks (files through the runtime's pre-processing): a GAN's test batch is more
than files. Noise models draw seeded noise per sample, pix2pix reads one half of a side-by-side file, attribute
editors choose target attributes per sample. So the config's model is built (its weights are not needed) and
predicts the batch as in a PyTorch evaluation, with its generator call (:meth:`BaseGAN.export_forward`) replaced by
the exported graph run by the runtime (``oars_deploy``'s :class:`GANPredictor`, ONNX Runtime or TensorRT). The
model's :meth:`BaseGAN.export_feeds` chooses the graph's inputs for prediction and evaluation alike, so the two
metrics differ only by the networks. The graph's outputs are rounded to whole 0..255 values, as the deployed
predictor writes them.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from mmengine.registry import DefaultScope

from gan.export import GRAPH_NAMES
from gan.registry import MODELS
from oars_deploy.errors import DeployError
from oars_deploy.predictors.gan_images.predictor import GANPredictor


class ExportedGenerator:
    """The runtime's generator of an export folder inside the config's GAN model (see the module docstring).

    Args:
        model_dir: the export folder (deploy.yaml with a ``gan`` section, model.onnx or model.engine).
        model_cfg: the config's ``model`` section (built with random weights: only its prediction logic and data
            preprocessor are used).
        device: ``cpu`` or ``cuda``. backend: ``onnxruntime`` or ``tensorrt``.

    Raises:
        oars_deploy.errors.DeployError: the folder is not a generator export, or its graph takes other inputs than
            the config's model feeds its generator (an export of another model), naming both.
    """

    def __init__(self, model_dir: str, model_cfg: dict, device: str = "cpu", backend: str = "onnxruntime") -> None:
        self.runtime = GANPredictor(model_dir, device=device, backend=backend)
        self.deploy = self.runtime.deploy
        with DefaultScope.overwrite_default_scope("gan"):
            self.model = MODELS.build(copy.deepcopy(dict(model_cfg))).eval()
        self.model.export_forward = self.graph_forward  # the instance's generator call is now the export's
        pre = self.model.data_preprocessor
        self.mean = _stat(getattr(pre, "mean", None), 0.0)
        self.std = _stat(getattr(pre, "std", None), 1.0)
        self.flip = bool(getattr(pre, "bgr_to_rgb", False))
        self.graph_keys = {name: key for key, name in GRAPH_NAMES.items()}  # graph input -> model key
        graph = sorted(self.graph_keys.get(n, n) for n in self.runtime.input_names)
        model = sorted(self.model.export_inputs(1))
        if graph != model:
            raise DeployError(f"the export takes {graph}, but the config's {type(self.model).__name__} feeds its "
                              f"generator {model}: evaluate the export with the config it was exported from")
        self.shapes = {spec["name"]: spec["shape"] for spec in self.runtime.gan["inputs"]}

    def graph_forward(self, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
        """:meth:`BaseGAN.export_forward` through the export: model-space feeds (images normalised) -> the graph's
        inputs (images back to 0..255, as the graph takes them) -> its output, rounded as deployed, normalised back
        so that the model's ``destruct`` returns exactly the deployed pixels.

        Args:
            feeds: :meth:`BaseGAN.export_feeds`' dict (``img`` float [B, 3, H, W] in model units; ``noise`` float
                [B, Z]; ``label`` int64 [B]; ``attrs`` / ``src_attrs`` float [B, K]).

        Returns:
            float32 [B, 3, H', W'] in the generator's output units, on the feeds' device.
        """
        device = next(iter(feeds.values())).device
        arrays = {}
        for name in self.runtime.input_names:
            key = self.graph_keys.get(name, name)
            value = feeds[key].detach().cpu()
            if key == "img":  # the inverse of the graph's normalisation (GeneratorGraph.forward)
                value = value.float() * self.std + self.mean
                value = value.flip(1) if self.flip else value
            arrays[name] = value.numpy().astype(np.int64 if name == "label" else np.float32)
            fixed = [int(d) for d in self.shapes[name][1:]]
            if list(arrays[name].shape[1:]) != fixed:
                raise DeployError(f"the test batch gives the generator's {key!r} as {list(arrays[name].shape[1:])} "
                                  f"per sample, the export's input {name!r} takes {fixed} (export.input_shape): "
                                  "make the test pipeline give the exported size, or export at the pipeline's")
        out = torch.from_numpy(np.clip(np.rint(self.runtime.run_graph(arrays)), 0.0, 255.0))
        out = out.flip(1) if self.flip else out
        return ((out - self.mean) / self.std).to(device)

    def predict(self, items: list[dict]) -> list[Any]:
        """Predict a batch given by :meth:`gan.task.GANExporter.export_inputs`.

        Args:
            items: per sample ``{'inputs': {key: tensor}, 'sample': GANDataSample}`` (the test batch's packed,
                un-normalised inputs).

        Returns:
            The predicted data samples, in order, without the fields the export cannot give
            (:attr:`BaseGAN.unexported_fields`).
        """
        keys = list(items[0]["inputs"]) if items else []
        batch = {"inputs": {k: [item["inputs"][k] for item in items] for k in keys},
                 "data_samples": [item["sample"] for item in items]}
        with torch.no_grad():
            data = self.model.data_preprocessor(batch, False)
            samples = self.model.predict(data["inputs"], data["data_samples"])
        for sample in samples:
            for field in self.model.unexported_fields:
                if field in sample:
                    delattr(sample, field)
        return samples


def _stat(value: torch.Tensor | None, default: float) -> torch.Tensor:
    """The data preprocessor's per-channel statistic as float [1, C, 1, 1] (``default`` when it has none)."""
    return (value if value is not None else torch.tensor([default])).detach().float().cpu().reshape(1, -1, 1, 1)
