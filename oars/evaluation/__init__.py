"""Metric building blocks shared by the tasks."""

from oars.evaluation.confusion import confusion_matrix, overall_accuracy, per_class_scores

__all__ = ['confusion_matrix', 'overall_accuracy', 'per_class_scores']
