// ONNX Runtime (C++ API) on the CPU; compiled only when CMake is given -DONNXRUNTIME_ROOT.
#include "backend.h"

#include <onnxruntime_cxx_api.h>

#include <stdexcept>

namespace oars {
namespace {

class OrtBackend : public Backend {
 public:
  explicit OrtBackend(const DeployConfig& cfg)
      : cfg_(cfg), env_(ORT_LOGGING_LEVEL_WARNING, "oars_infer"), memory_(Ort::MemoryInfo::CreateCpu(
                                                                         OrtArenaAllocator, OrtMemTypeDefault)) {
    Ort::SessionOptions options;
    options.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_ENABLE_ALL);
    try {
      session_ = std::make_unique<Ort::Session>(env_, cfg.onnx_path().c_str(), options);
    } catch (const Ort::Exception& e) {
      throw std::runtime_error("ONNX Runtime cannot load " + cfg.onnx_path() + ": " + e.what());
    }
    for (const auto& o : cfg.outputs) output_names_.push_back(o.name);
  }

  std::vector<cv::Mat> run(const cv::Mat& blob) override {
    std::vector<int64_t> shape(blob.size.p, blob.size.p + blob.dims);
    Ort::Value input = Ort::Value::CreateTensor<float>(memory_, const_cast<float*>(blob.ptr<float>()), blob.total(),
                                                       shape.data(), shape.size());
    const char* input_name = cfg_.input.name.c_str();
    std::vector<const char*> names;
    for (const auto& n : output_names_) names.push_back(n.c_str());
    std::vector<Ort::Value> values;
    try {
      values = session_->Run(Ort::RunOptions{nullptr}, &input_name, &input, 1, names.data(), names.size());
    } catch (const Ort::Exception& e) {
      throw std::runtime_error("ONNX Runtime failed to run " + cfg_.onnx_path() + ": " + e.what());
    }
    std::vector<cv::Mat> outs;
    for (auto& v : values) outs.push_back(to_mat(v));
    return outs;
  }

  std::string name() const override { return "onnxruntime"; }

 private:
  static cv::Mat to_mat(Ort::Value& value) {
    auto info = value.GetTensorTypeAndShapeInfo();
    const std::vector<int64_t> shape = info.GetShape();
    const size_t n = info.GetElementCount();
    switch (info.GetElementType()) {
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: {
        cv::Mat m = make_nd(shape, CV_32F);
        std::copy_n(value.GetTensorData<float>(), n, m.ptr<float>());
        return m;
      }
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: {
        cv::Mat m = make_nd(shape, CV_32S);
        const int64_t* src = value.GetTensorData<int64_t>();
        int* dst = m.ptr<int>();
        for (size_t i = 0; i < n; ++i) dst[i] = static_cast<int>(src[i]);
        return m;
      }
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: {
        cv::Mat m = make_nd(shape, CV_32S);
        std::copy_n(value.GetTensorData<int32_t>(), n, m.ptr<int>());
        return m;
      }
      default:
        throw std::runtime_error("ONNX Runtime backend: unsupported output element type " +
                                 std::to_string(static_cast<int>(info.GetElementType())) +
                                 " (expected float32, int32 or int64)");
    }
  }

  DeployConfig cfg_;
  Ort::Env env_;
  Ort::MemoryInfo memory_;
  std::unique_ptr<Ort::Session> session_;
  std::vector<std::string> output_names_;
};

}  // namespace

std::unique_ptr<Backend> make_onnxruntime_backend(const DeployConfig& cfg) { return std::make_unique<OrtBackend>(cfg); }

}  // namespace oars
