// The deploy.yaml pre-processing steps on a BGR uint8 image, giving the NCHW float blob the model takes.
#pragma once

#include "deploy_config.h"

#include <opencv2/core.hpp>

namespace oars {

struct ImageMeta {
  int ori_h = 0, ori_w = 0;       // the image as read
  int img_h = 0, img_w = 0;       // after Resize (before Pad): the valid region of the input
  int pad_h = 0, pad_w = 0;       // the network input size
  double scale_w = 1.0, scale_h = 1.0;  // img / ori (the Python side's scale_factor)
};

// Resize keep_ratio: (w, h) scaled by min(W / w, H / h), rounded half up (for square sizes this is oars' Resize,
// i.e. mmcv's rescale_size, exactly).
cv::Size fit_inside(int w, int h, int target_w, int target_h);

// Runs cfg.preprocess in order; returns a [1, 3, H, W] CV_32F blob and fills meta.
cv::Mat preprocess(const cv::Mat& bgr, const DeployConfig& cfg, ImageMeta& meta);

}  // namespace oars
