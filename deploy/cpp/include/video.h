// Video (clip) classification: frames read with cv::VideoCapture, test-time sampling and the video
// pre-processing of deploy.yaml (the formulas of oars_deploy.clips.sampling / clips.preprocess), top-k scores.
#pragma once

#include "deploy_config.h"

#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace oars {

// SampleFrames(test_mode=True): 0-based frame indices [views * clip_len], clip-major, in [0, total - 1].
std::vector<int64_t> sample_frame_indices(int total, const SamplingSpec& s);

struct VideoClip {
  cv::Mat blob;                    // float32 [1, V*T, 3, H, W] (NTCHW)
  int total_frames = 0;
  std::vector<int64_t> frame_inds;
};

// Decode `path` (frame i = the i-th frame read forward, presentation order), sample, pre-process.
// Throws std::runtime_error naming the file when it cannot be read.
VideoClip load_video_clip(const std::string& path, const DeployConfig& cfg);

// Class ids of the k highest scores, highest first, ties to the lower id.
std::vector<int> top_k(const float* scores, int num_classes, int k);

}  // namespace oars
