"""gan package: image generation and image-to-image translation (DCGAN, CGAN, Pix2Pix, CycleGAN, ...)."""
