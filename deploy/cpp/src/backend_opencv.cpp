// OpenCV DNN on the CPU: always available from the system's libopencv-dev. Every tensor is float inside
// OpenCV DNN, so integer outputs (argmax labels, class ids) are converted back to CV_32S here. It runs the FP32
// graph (deploy.yaml model.onnx_fp32) also after an FP16/INT8 export: its CPU target computes in FP32 anyway.
#include "backend.h"

#include <opencv2/dnn.hpp>

#include <stdexcept>

namespace oars {
namespace {

class OpenCvBackend : public Backend {
 public:
  explicit OpenCvBackend(const DeployConfig& cfg) : cfg_(cfg) {
    try {
      net_ = cv::dnn::readNetFromONNX(cfg.onnx_fp32_path());
    } catch (const cv::Exception& e) {
      throw std::runtime_error("OpenCV DNN " CV_VERSION " cannot load " + cfg.onnx_fp32_path() + ": " + e.what() +
                               "\n(see deploy/cpp/README.md for the graphs it can run; try --backend onnxruntime)");
    }
    net_.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    net_.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
    for (const auto& o : cfg.outputs) names_.push_back(o.name);
  }

  std::vector<cv::Mat> run(const cv::Mat& blob) override {
    std::vector<cv::Mat> outs;
    try {
      net_.setInput(blob, cfg_.input.name);
      net_.forward(outs, names_);
    } catch (const cv::Exception& e) {
      throw std::runtime_error("OpenCV DNN " CV_VERSION " failed to run " + cfg_.onnx_fp32_path() + ": " + e.what());
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string& dtype = cfg_.outputs[i].dtype;
      if (dtype.rfind("int", 0) == 0 && outs[i].depth() != CV_32S) {
        cv::Mat converted;
        outs[i].convertTo(converted, CV_32S);  // rounds; values are exact small integers stored as float
        outs[i] = converted;
      } else if (dtype.rfind("float", 0) == 0 && outs[i].depth() != CV_32F) {
        cv::Mat converted;
        outs[i].convertTo(converted, CV_32F);
        outs[i] = converted;
      }
    }
    return outs;
  }

  std::string name() const override { return "opencv"; }

 private:
  DeployConfig cfg_;
  cv::dnn::Net net_;
  std::vector<std::string> names_;
};

}  // namespace

std::unique_ptr<Backend> make_opencv_backend(const DeployConfig& cfg) { return std::make_unique<OpenCvBackend>(cfg); }

}  // namespace oars
