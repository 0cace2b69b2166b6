"""Loading transforms of the video pipelines: open a video (``VideoInit``), decode the sampled frames
(``VideoDecode``), read frames of a frame folder (``RawFrameDecode``) and load frame features (``LoadFeatures``).

Order in a pipeline: ``VideoInit`` -> ``SampleFrames`` (writes 0-based ``frame_inds``) -> ``VideoDecode`` ->
spatial transforms -> ``FormatShape`` -> ``PackActionInputs``. For frame folders, ``SampleFrames`` ->
``RawFrameDecode`` (the dataset gives ``total_frames``). Decoding happens in ``__getitem__`` (in the DataLoader
workers), only the sampled frames are decoded, and every failure is a ``DataError`` naming the file, so that
``on_bad_sample: skip`` can skip it.
"""

from __future__ import annotations

import numpy as np

from oars.errors import DataError
from oars_deploy.predictors.feature_classes.files import load_features, uniform_indices  # noqa: F401  (uniform_indices: re-export)
from video.datasets.decoders import BACKENDS, RawFrameReader, VideoReader, open_video
from video.datasets.features import as_data_error, read_feature_file
from video.registry import TRANSFORMS


def _frame_inds(results: dict, owner: str) -> np.ndarray:
    if 'frame_inds' not in results:
        raise KeyError(f"{owner} needs results['frame_inds'] (0-based frame indices); put SampleFrames before it")
    return np.asarray(results['frame_inds']).reshape(-1)


def _set_frames(results: dict, imgs: list[np.ndarray]) -> dict:
    results['imgs'] = imgs
    shape = tuple(int(s) for s in imgs[0].shape[:2]) if imgs else (0, 0)
    results['original_shape'] = shape
    results['img_shape'] = shape
    return results


@TRANSFORMS.register_module()
class VideoInit:
    """Open ``results['filename']`` with ``backend``; set ``total_frames`` (int), ``avg_fps`` (float) and
    ``video_reader`` (the open reader, closed by ``VideoDecode``).

    Args:
        backend: ``'pyav'`` (default) or ``'torchcodec'`` (optional dependency; a clear error when missing).
        num_threads: decoding threads per reader (1 suits DataLoader workers).
    """

    def __init__(self, backend: str = 'pyav', num_threads: int = 1) -> None:
        if backend not in BACKENDS:
            raise DataError(f'VideoInit: backend must be one of {list(BACKENDS)}, got {backend!r}')
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 0:
            raise DataError(f'VideoInit: num_threads must be an integer >= 0 (0: FFmpeg decides), got {num_threads!r}')
        self.backend = backend
        self.num_threads = num_threads

    def __call__(self, results: dict) -> dict:
        if 'filename' not in results:
            raise KeyError("VideoInit needs results['filename'] (the video file); is the dataset a VideoDataset?")
        reader = open_video(results['filename'], self.backend, self.num_threads)
        results['video_reader'] = reader
        results['total_frames'] = reader.total_frames
        results['avg_fps'] = reader.avg_fps
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(backend={self.backend!r}, num_threads={self.num_threads})'


@TRANSFORMS.register_module()
class VideoDecode:
    """Decode exactly ``results['frame_inds']`` (0-based; any order, repeats decoded once) from
    ``results['video_reader']``; set ``imgs`` (list of HxWx3 uint8 BGR arrays, one per index, same order),
    ``original_shape`` and ``img_shape`` (H, W). Closes and removes ``video_reader``, also when decoding fails.
    """

    def __call__(self, results: dict) -> dict:
        reader: VideoReader | None = results.pop('video_reader', None)
        if reader is None:
            raise KeyError("VideoDecode needs results['video_reader']; put VideoInit first in the pipeline")
        try:
            imgs = reader.get_frames(_frame_inds(results, 'VideoDecode'))
        finally:
            reader.close()
        # a repeated index shares its array; the spatial transforms may write in place, so copy repeats
        seen: set[int] = set()
        out = []
        for img in imgs:
            out.append(img.copy() if id(img) in seen else img)
            seen.add(id(img))
        return _set_frames(results, out)

    def __repr__(self) -> str:
        return f'{type(self).__name__}()'


@TRANSFORMS.register_module()
class RawFrameDecode:
    """Read the frames ``results['frame_inds']`` (0-based) of the folder ``results['frame_dir']``: index ``i`` is the
    file ``filename_tmpl.format(i + start_index)`` (both from the dataset's sample). Sets ``imgs`` (BGR, one per
    index, same order), ``original_shape``, ``img_shape``. A missing or unreadable frame file is a ``DataError``
    naming it, the template and ``start_index``.
    """

    def __call__(self, results: dict) -> dict:
        for key in ('frame_dir', 'total_frames'):
            if key not in results:
                raise KeyError(f"RawFrameDecode needs results[{key!r}]; is the dataset a RawframeDataset?")
        reader = RawFrameReader(results['frame_dir'], results['total_frames'],
                                results.get('filename_tmpl', 'img_{:05d}.jpg'), results.get('start_index', 1))
        imgs = reader.get_frames(_frame_inds(results, 'RawFrameDecode'))
        return _set_frames(results, [img.copy() if k and img is imgs[k - 1] else img for k, img in enumerate(imgs)])

    def __repr__(self) -> str:
        return f'{type(self).__name__}()'


@TRANSFORMS.register_module()
class LoadFeatures:
    """Read ``results['filename']`` (``.npz`` / ``.pkl`` with one [T, D] array per modality) into
    ``results['features']`` = {modality: float32 [T', D]} with ``T' = min(T, max_frames)``; sets ``num_frames`` (T'),
    ``total_frames`` (T) and ``feature_inds`` (np.int64 [T'], the frames kept).

    uint8 arrays are dequantised as YouTube-8M does (``min_quantized_value``..``max_quantized_value``, default
    -2..2); float arrays are used as they are. Longer sequences are cut to ``max_frames`` by uniform sampling:
    one frame per equal segment, at its centre with ``test_mode`` (deterministic), at a random place in training.
    Both formulas are :mod:`oars_deploy.predictors.feature_classes.files` (:func:`load_features`), which the deployed
    feature
    predictor runs too.

    Args:
        modalities: the arrays to load (every one must be in the file, all with the same T).
        max_frames: the most frames kept.
        test_mode: deterministic sampling.
    """

    def __init__(self, modalities: tuple[str, ...] | list[str] = ('rgb', 'audio'), max_frames: int = 300,
                 test_mode: bool = False, min_quantized_value: float = -2.0, max_quantized_value: float = 2.0) -> None:
        if isinstance(modalities, str) or not modalities:
            raise DataError(f"LoadFeatures: modalities must be a non-empty list of names, e.g. ['rgb', 'audio'], "
                            f"got {modalities!r}")
        if isinstance(max_frames, bool) or not isinstance(max_frames, int) or max_frames < 1:
            raise DataError(f'LoadFeatures: max_frames must be a positive integer, got {max_frames!r}')
        if max_quantized_value <= min_quantized_value:
            raise DataError(f'LoadFeatures: max_quantized_value ({max_quantized_value}) must exceed '
                            f'min_quantized_value ({min_quantized_value})')
        self.modalities = tuple(modalities)
        self.max_frames = max_frames
        self.test_mode = bool(test_mode)
        self.min_quantized_value = float(min_quantized_value)
        self.max_quantized_value = float(max_quantized_value)

    def __call__(self, results: dict) -> dict:
        if 'filename' not in results:
            raise KeyError("LoadFeatures needs results['filename'] (the feature file); is the dataset a "
                           "FeatureDataset?")
        path = str(results['filename'])
        arrays = read_feature_file(path)
        with as_data_error():
            feats, inds, total = load_features(path, arrays, self.modalities, self.max_frames, self.test_mode,
                                               self.min_quantized_value, self.max_quantized_value)
        results['features'] = feats
        results['num_frames'] = int(inds.size)
        results['total_frames'] = int(total)
        results['feature_inds'] = inds
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(modalities={list(self.modalities)}, max_frames={self.max_frames}, '
                f'test_mode={self.test_mode})')
