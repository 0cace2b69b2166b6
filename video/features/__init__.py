"""Snippet features of long videos from a trained recognizer (``tools/extract_features.py``), the input of the
temporal action localisers (BMN reads ``<video_id>.npy`` T x C plus ``videos.json``: video.datasets.activitynet).

Modules: :mod:`~video.features.frames` (sequential decoding), :mod:`~video.features.snippets` (which frames a
snippet takes and the test pipeline's steps after decoding), :mod:`~video.features.clips` (the DataLoader side: one
video per worker, snippets in chunks), :mod:`~video.features.pooled` (the recognizer's pooled features),
:mod:`~video.features.outputs` (the files and the resume rule), :mod:`~video.features.progress` and
:mod:`~video.features.extract` (the command). Nothing heavy is imported here.
"""
