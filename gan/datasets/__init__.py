"""GAN datasets (class folders, MNIST, paired and unpaired image-to-image, CelebA attributes), registered in
``gan.registry.DATASETS`` on import; importing it also registers the gan transforms."""

from gan import transforms  # noqa: F401  (the pipelines of these datasets use the gan transforms)
from gan.datasets.base import IMG_EXTENSIONS, GANDataset, list_images
from gan.datasets.celeba import CelebADataset
from gan.datasets.celeba_attrs import HAIR_COLOURS, read_attr_file, sample_target_attrs
from gan.datasets.image_folder import ImageFolderGANDataset
from gan.datasets.mnist import MNISTDataset, read_idx
from gan.datasets.paired import PairedImageDataset
from gan.datasets.unpaired import UnpairedImageDataset

__all__ = ['HAIR_COLOURS', 'IMG_EXTENSIONS', 'CelebADataset', 'GANDataset', 'ImageFolderGANDataset', 'MNISTDataset',
           'PairedImageDataset', 'UnpairedImageDataset', 'list_images', 'read_attr_file', 'read_idx',
           'sample_target_attrs']
