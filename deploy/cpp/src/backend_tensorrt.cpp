// TensorRT (8.5+ name-based I/O API, 10.x tested against its headers): runs MODEL_DIR/model.engine (or the
// deploy.yaml model.engine file) built by `tools/export.py --format tensorrt`. Compiled only with -DTENSORRT_ROOT.
#include "backend.h"

#include <NvInfer.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <cstring>
#include <stdexcept>

namespace oars {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " +
                                                      cudaGetErrorString(status));
}

class Logger : public nvinfer1::ILogger {
  void log(Severity severity, const char* msg) noexcept override {
    if (severity <= Severity::kWARNING) std::cerr << "[TensorRT] " << msg << "\n";
  }
};

size_t element_size(nvinfer1::DataType t) {
  switch (t) {
    case nvinfer1::DataType::kFLOAT: return 4;
    case nvinfer1::DataType::kHALF: return 2;
    case nvinfer1::DataType::kINT32: return 4;
#if NV_TENSORRT_MAJOR >= 10
    case nvinfer1::DataType::kINT64: return 8;
#endif
    case nvinfer1::DataType::kBOOL: return 1;
    case nvinfer1::DataType::kINT8: return 1;
    default: throw std::runtime_error("TensorRT backend: unsupported tensor data type");
  }
}

class TrtBackend : public Backend {
 public:
  explicit TrtBackend(const DeployConfig& cfg) : cfg_(cfg) {
    std::ifstream file(cfg.engine_path(), std::ios::binary);
    if (!file) throw std::runtime_error("TensorRT backend: cannot read " + cfg.engine_path() +
                                        " (build it with tools/export.py --format tensorrt)");
    std::vector<char> data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    runtime_.reset(nvinfer1::createInferRuntime(logger_));
    engine_.reset(runtime_->deserializeCudaEngine(data.data(), data.size()));
    if (!engine_) throw std::runtime_error("TensorRT backend: cannot deserialize " + cfg.engine_path() +
                                           " (built with another TensorRT version or GPU?)");
    context_.reset(engine_->createExecutionContext());
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
  }

  ~TrtBackend() override {
    for (auto& kv : buffers_) cudaFree(kv.second.first);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::vector<cv::Mat> run(const cv::Mat& blob) override {
    const char* in = cfg_.input.name.c_str();
    nvinfer1::Dims dims{};
    dims.nbDims = blob.dims;
    for (int i = 0; i < blob.dims; ++i) dims.d[i] = blob.size[i];
    if (!context_->setInputShape(in, dims))
      throw std::runtime_error("TensorRT backend: input shape outside the engine's optimisation profile");
    const size_t in_bytes = blob.total() * sizeof(float);
    void* d_in = buffer(in, in_bytes);
    check(cudaMemcpyAsync(d_in, blob.ptr<float>(), in_bytes, cudaMemcpyHostToDevice, stream_), "copy input");
    context_->setTensorAddress(in, d_in);

    std::vector<std::pair<nvinfer1::Dims, nvinfer1::DataType>> specs;
    for (const auto& o : cfg_.outputs) {
      nvinfer1::Dims d = context_->getTensorShape(o.name.c_str());
      const nvinfer1::DataType t = engine_->getTensorDataType(o.name.c_str());
      size_t count = 1;
      for (int i = 0; i < d.nbDims; ++i) count *= static_cast<size_t>(d.d[i]);
      context_->setTensorAddress(o.name.c_str(), buffer(o.name, std::max<size_t>(count, 1) * element_size(t)));
      specs.emplace_back(d, t);
    }
    if (!context_->enqueueV3(stream_)) throw std::runtime_error("TensorRT backend: enqueueV3 failed");

    std::vector<cv::Mat> outs;
    for (size_t k = 0; k < cfg_.outputs.size(); ++k) {
      const auto& [d, t] = specs[k];
      std::vector<int64_t> shape(d.d, d.d + d.nbDims);
      size_t count = 1;
      for (auto s : shape) count *= static_cast<size_t>(s);
      std::vector<char> host(count * element_size(t));
      check(cudaMemcpyAsync(host.data(), buffers_[cfg_.outputs[k].name].first, host.size(), cudaMemcpyDeviceToHost,
                            stream_), "copy output");
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      outs.push_back(to_mat(host, shape, t));
    }
    return outs;
  }

  std::string name() const override { return "tensorrt"; }

 private:
  void* buffer(const std::string& name, size_t bytes) {
    auto& slot = buffers_[name];
    if (slot.second < bytes) {
      if (slot.first) cudaFree(slot.first);
      check(cudaMalloc(&slot.first, bytes), "cudaMalloc");
      slot.second = bytes;
    }
    return slot.first;
  }

  static cv::Mat to_mat(const std::vector<char>& host, const std::vector<int64_t>& shape, nvinfer1::DataType t) {
    const size_t n = host.size() / element_size(t);
    switch (t) {
      case nvinfer1::DataType::kFLOAT: {
        cv::Mat m = make_nd(shape, CV_32F);
        std::memcpy(m.ptr(), host.data(), host.size());
        return m;
      }
      case nvinfer1::DataType::kHALF: {
        cv::Mat half = make_nd(shape, CV_16F), m;
        std::memcpy(half.ptr(), host.data(), host.size());
        half.convertTo(m, CV_32F);
        return m;
      }
      case nvinfer1::DataType::kINT32: {
        cv::Mat m = make_nd(shape, CV_32S);
        std::memcpy(m.ptr(), host.data(), host.size());
        return m;
      }
#if NV_TENSORRT_MAJOR >= 10
      case nvinfer1::DataType::kINT64: {
        cv::Mat m = make_nd(shape, CV_32S);
        const auto* src = reinterpret_cast<const int64_t*>(host.data());
        for (size_t i = 0; i < n; ++i) m.ptr<int>()[i] = static_cast<int>(src[i]);
        return m;
      }
#endif
      default:
        (void)n;
        throw std::runtime_error("TensorRT backend: unsupported output data type (expected float, half, int32/64)");
    }
  }

  DeployConfig cfg_;
  Logger logger_;
  std::unique_ptr<nvinfer1::IRuntime> runtime_;
  std::unique_ptr<nvinfer1::ICudaEngine> engine_;
  std::unique_ptr<nvinfer1::IExecutionContext> context_;
  cudaStream_t stream_ = nullptr;
  std::map<std::string, std::pair<void*, size_t>> buffers_;
};

}  // namespace

std::unique_ptr<Backend> make_tensorrt_backend(const DeployConfig& cfg) { return std::make_unique<TrtBackend>(cfg); }

}  // namespace oars
