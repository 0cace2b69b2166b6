"""The data sample that carries one GAN sample's inputs' metadata, ground truth copies and generated image."""

from __future__ import annotations

from mmengine.structures import BaseDataElement

IMAGE_FIELDS = ("fake_img", "gt_img", "real_A", "real_B", "fake_B_to_A")


class GANDataSample(BaseDataElement):
    """One sample of a GAN task.

    Metainfo keys (set by the dataset pipeline's ``PackGANInputs``): ``img_path`` (and ``img_path_B`` for a second
    domain or the paired target), ``attr_names`` (attribute models), ``sample_idx``, ``seed`` (the noise seed of an
    unconditional sample, optional).

    Data fields (set by the model at predict time), each float32 [3, H, W] in the 0..255 range (denormalised from the
    generator's [-1, 1]), on the CPU:
        fake_img: the generated image (DCGAN/CGAN sample, Pix2Pix/CycleGAN translation in the configured direction).
        gt_img: the real image of the sample (DCGAN/CGAN target, the translation's ground truth when paired).
        real_A, real_B: the two domains' real images (Pix2Pix, CycleGAN).
        fake_B_to_A: CycleGAN's B->A translation when the sample has both domains.
    Fields are plain attributes of :class:`BaseDataElement` (``sample.fake_img = t``; ``'fake_img' in sample``).
    """
