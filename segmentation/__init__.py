"""segmentation package."""
