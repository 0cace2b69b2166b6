"""Video datasets (video lists, frame folders, frame features) and their loading transforms, registered in
``video.registry`` on import."""

from video.datasets.activitynet import ActivityNetFeatureDataset
from video.datasets.decoders import (
    BACKENDS,
    BackendUnavailableError,
    PyAVReader,
    RawFrameReader,
    TorchCodecReader,
    VideoReader,
    open_video,
    torchcodec_available,
)
from video.datasets.feature_dataset import FeatureDataset
from video.datasets.features import dequantize, read_feature_file
from video.datasets.loading import LoadFeatures, RawFrameDecode, VideoDecode, VideoInit
from video.datasets.video_dataset import RawframeDataset, VideoDataset

__all__ = ['ActivityNetFeatureDataset', 'BACKENDS', 'BackendUnavailableError', 'FeatureDataset', 'LoadFeatures',
           'PyAVReader', 'RawFrameDecode', 'RawFrameReader', 'RawframeDataset', 'TorchCodecReader', 'VideoDataset',
           'VideoDecode', 'VideoInit', 'VideoReader', 'dequantize', 'open_video', 'read_feature_file',
           'torchcodec_available']
