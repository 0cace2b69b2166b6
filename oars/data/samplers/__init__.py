"""Data samplers of the core (registered in ``oars.registry.DATA_SAMPLERS``): importing this package registers
them."""

from .class_aware import ClassAwareSampler, class_aware_weights, image_class_pairs

__all__ = ["ClassAwareSampler", "class_aware_weights", "image_class_pairs"]
