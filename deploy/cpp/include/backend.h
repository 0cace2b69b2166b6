// One interface over the inference engines: a [1, 3, H, W] float blob in, the deploy.yaml outputs out (in the
// order deploy.yaml lists them). Float outputs come back as CV_32F, integer ones as CV_32S.
#pragma once

#include "deploy_config.h"

#include <opencv2/core.hpp>

#include <memory>
#include <string>
#include <vector>

namespace oars {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::vector<cv::Mat> run(const cv::Mat& blob) = 0;
  virtual std::string name() const = 0;
};

// "opencv" (always built), "onnxruntime" (with -DONNXRUNTIME_ROOT), "tensorrt" (with -DTENSORRT_ROOT).
// Throws std::runtime_error for a backend this binary was built without, naming the CMake option.
std::unique_ptr<Backend> make_backend(const std::string& name, const DeployConfig& cfg);

std::unique_ptr<Backend> make_opencv_backend(const DeployConfig& cfg);
#ifdef OARS_WITH_ONNXRUNTIME
std::unique_ptr<Backend> make_onnxruntime_backend(const DeployConfig& cfg);
#endif
#ifdef OARS_WITH_TENSORRT
std::unique_ptr<Backend> make_tensorrt_backend(const DeployConfig& cfg);
#endif

// A contiguous N-d cv::Mat of `type` with the given shape (cv::Mat needs at least 2 dims: [N] becomes [N, 1]).
cv::Mat make_nd(const std::vector<int64_t>& shape, int type);

}  // namespace oars
