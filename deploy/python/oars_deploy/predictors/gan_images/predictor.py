"""Run an exported GAN generator (deploy.yaml with a ``gan`` section) with ONNX Runtime or TensorRT, no torch.

:class:`GANPredictor` feeds the graph inputs deploy.yaml lists (``noise``/``label``, or ``image`` read and
preprocessed with deploy.yaml's steps, plus ``attrs``/``src_attrs``) and returns uint8 BGR pictures ready for
``cv2.imwrite``. A model exported with a fixed batch B is fed in chunks of exactly B (the last chunk padded with
copies of its first row, whose outputs are dropped).
"""

from __future__ import annotations

import os.path as osp
from collections.abc import Sequence

import numpy as np

from oars_deploy.backends import make_backend
from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
from oars_deploy.errors import DeployError
from oars_deploy.predictors.gan_images.config import GAN_KEY, to_bgr_images
from oars_deploy.preprocess import preprocess_one


class GANPredictor:
    """The generator of ``model_dir``: :meth:`generate` (noise models) and :meth:`translate` (image models)."""

    def __init__(self, model_dir: str, device: str = "cpu", backend: str = "onnxruntime") -> None:
        self.deploy = read_deploy_yaml(osp.join(model_dir, DEPLOY_FILE))
        if GAN_KEY not in self.deploy:
            raise DeployError(f"{osp.join(model_dir, DEPLOY_FILE)}: not a GAN generator (no `gan` section)")
        self.gan: dict = self.deploy[GAN_KEY]
        self.kind: str = self.gan["kind"]
        self.input_names = [spec["name"] for spec in self.gan["inputs"]]
        batch = int(self.gan["inputs"][0]["shape"][0])
        self.batch_size: int | None = None if batch < 0 else batch  # None: dynamic batch
        self.output_name = self.deploy["outputs"][0]["name"]
        self.backend = make_backend(backend, model_dir, self.deploy["model"], device)

    # ---- noise models -----------------------------------------------------------------------------------------
    def generate(self, noise: np.ndarray, labels: np.ndarray | None = None) -> list[np.ndarray]:
        """``noise`` float32 [N, z_dim] (+ ``labels`` int64 [N] for a class-conditional model) -> N BGR images."""
        if self.kind != "noise":
            raise DeployError(f"this model translates images (gan.kind {self.kind}); give -i IMAGE_OR_DIR")
        z = int(self.gan["z_dim"])
        noise = np.asarray(noise, dtype=np.float32)
        if noise.ndim != 2 or noise.shape[1] != z:
            raise DeployError(f"noise must be [N, {z}] (gan.z_dim), got {list(noise.shape)}")
        feeds = {"noise": noise}
        if "label" in self.input_names:
            if labels is None:
                raise DeployError("this generator is class-conditional: it needs labels (--label K)")
            feeds["label"] = np.asarray(labels, dtype=np.int64).reshape(-1)
        return self._run(feeds, len(noise))

    # ---- image models -----------------------------------------------------------------------------------------
    def preprocess(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """BGR uint8 HxWx3 images -> the ``image`` input, float32 [N, 3, H, W] RGB 0..255 (deploy.yaml's steps)."""
        steps = self.deploy["preprocess"]
        return np.concatenate([preprocess_one(img, steps)[0][None] for img in images])

    def translate(self, images: Sequence[np.ndarray], attrs: np.ndarray | None = None,
                  src_attrs: np.ndarray | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """BGR images (+ ``attrs`` / ``src_attrs`` float32 [K] or [N, K] 0/1 for attribute models) -> (the inputs as
        the model saw them, resized, BGR uint8; the outputs, BGR uint8)."""
        if self.kind == "noise":
            raise DeployError("this model generates from noise (gan.kind noise): use --seed/--num, not -i")
        x = self.preprocess(images)
        feeds = {"image": x}
        k = len(self.gan.get("attr_names") or [])
        for name, value in (("attrs", attrs), ("src_attrs", src_attrs)):
            if name not in self.input_names:
                continue
            if value is None:
                value = np.zeros(k, dtype=np.float32)
            value = np.asarray(value, dtype=np.float32)
            feeds[name] = np.broadcast_to(value.reshape(-1, k), (len(x), k)).copy()
        return to_bgr_images(x), self._run(feeds, len(x))

    # ---- the graph --------------------------------------------------------------------------------------------
    def run_graph(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The raw output float32 [N, 3, H, W] RGB 0..255 for ``feeds`` (every graph input, batch N)."""
        n = len(next(iter(feeds.values())))
        step = self.batch_size or n
        outs = []
        for start in range(0, n, step):
            chunk = {k: v[start:start + step] for k, v in feeds.items()}
            got = len(next(iter(chunk.values())))
            if got < step:  # a fixed-batch graph: pad with copies of the first row
                chunk = {k: np.concatenate([v, np.repeat(v[:1], step - got, axis=0)]) for k, v in chunk.items()}
            outs.append(self.backend(chunk)[self.output_name][:got])
        return np.concatenate(outs)

    def _run(self, feeds: dict[str, np.ndarray], n: int) -> list[np.ndarray]:
        missing = [name for name in self.input_names if name not in feeds]
        if missing:
            raise DeployError(f"the generator needs inputs {self.input_names}; missing {missing}")
        return to_bgr_images(self.run_graph(feeds))
