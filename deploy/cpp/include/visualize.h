// Pictures of the results (the Python predictor draws its own with the training code's functions; these are
// for looking at, not for comparing pixel by pixel).
#pragma once

#include "deploy_config.h"
#include "postprocess.h"

#include <opencv2/core.hpp>

#include <vector>

namespace oars {

cv::Vec3b label_color_bgr(const DeployConfig& cfg, int label);
cv::Mat draw_detections(const cv::Mat& bgr, const std::vector<Detection>& dets, const DeployConfig& cfg);
cv::Mat draw_segmentation(const cv::Mat& bgr, const cv::Mat& labels, const DeployConfig& cfg, double alpha = 0.5);

}  // namespace oars
