"""The official ActivityNet evaluation code (activitynet/ActivityNet ``Evaluation/``, MIT licence), vendored as a
test reference for ``video.evaluation.activitynet_eval``; see README.md for its origin and the patches."""
