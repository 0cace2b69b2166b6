// Backend selection; only the backends whose SDK was given to CMake are compiled in.
#include "backend.h"

#include <stdexcept>

namespace oars {

cv::Mat make_nd(const std::vector<int64_t>& shape, int type) {
  std::vector<int> sizes(shape.begin(), shape.end());
  if (sizes.empty()) sizes = {1};
  if (sizes.size() == 1) sizes.push_back(1);
  return cv::Mat(static_cast<int>(sizes.size()), sizes.data(), type);
}

std::unique_ptr<Backend> make_backend(const std::string& name, const DeployConfig& cfg) {
  if (name == "opencv") return make_opencv_backend(cfg);
  if (name == "onnxruntime") {
#ifdef OARS_WITH_ONNXRUNTIME
    return make_onnxruntime_backend(cfg);
#else
    throw std::runtime_error(
        "backend 'onnxruntime' was not built in: configure with -DONNXRUNTIME_ROOT=/path/to/onnxruntime "
        "(the folder with include/ and lib/ of an ONNX Runtime release)");
#endif
  }
  if (name == "tensorrt") {
#ifdef OARS_WITH_TENSORRT
    return make_tensorrt_backend(cfg);
#else
    throw std::runtime_error(
        "backend 'tensorrt' was not built in: configure with -DTENSORRT_ROOT=/path/to/TensorRT (and CUDA installed)");
#endif
  }
  throw std::runtime_error("unknown backend '" + name + "' (expected opencv, onnxruntime or tensorrt)");
}

}  // namespace oars
