"""GAN metrics (registered in ``gan.registry.METRICS`` on import): PSNR, SSIM, MS-SSIM, FID, KID and attribute
accuracy."""

from gan.evaluation.attribute import AttributeAccuracy
from gan.evaluation.fid import FID, KID
from gan.evaluation.image_quality import MSSSIM, PSNR, SSIM, ms_ssim_per_image, psnr_per_image, ssim_per_image
from gan.evaluation.inception import InceptionFeatures

__all__ = ['FID', 'KID', 'MSSSIM', 'PSNR', 'SSIM', 'AttributeAccuracy', 'InceptionFeatures', 'ms_ssim_per_image',
           'psnr_per_image', 'ssim_per_image']
