// Mirrors the Python side step by step: cv::resize (INTER_LINEAR on uint8, as albumentations calls cv2.resize),
// then ((x[..., ::-1] if to_rgb) - mean) / std in float32, then bottom/right padding, then HWC -> NCHW.
#include "preprocess.h"

#include <opencv2/imgproc.hpp>

#include <cmath>
#include <stdexcept>

namespace oars {

cv::Size fit_inside(int w, int h, int target_w, int target_h) {
  const double factor = std::min(static_cast<double>(target_w) / w, static_cast<double>(target_h) / h);
  // int(x + 0.5) as in Python (values are positive, so truncation == floor).
  return {static_cast<int>(w * factor + 0.5), static_cast<int>(h * factor + 0.5)};
}

namespace {

cv::Mat resize(const cv::Mat& img, const ResizeStep& step, ImageMeta& meta) {
  const cv::Size size = step.keep_ratio ? fit_inside(img.cols, img.rows, step.width, step.height)
                                        : cv::Size(step.width, step.height);
  meta.scale_w *= static_cast<double>(size.width) / img.cols;
  meta.scale_h *= static_cast<double>(size.height) / img.rows;
  if (size == img.size()) return img;
  cv::Mat out;
  cv::resize(img, out, size, 0, 0, step.interpolation);
  return out;
}

cv::Mat normalize(const cv::Mat& img, const NormalizeStep& step) {
  cv::Mat f;
  img.convertTo(f, CV_32FC3);
  if (step.to_rgb) cv::cvtColor(f, f, cv::COLOR_BGR2RGB);
  const float m0 = step.mean[0], m1 = step.mean[1], m2 = step.mean[2];
  const float s0 = step.std[0], s1 = step.std[1], s2 = step.std[2];
  for (int y = 0; y < f.rows; ++y) {
    auto* p = f.ptr<cv::Vec3f>(y);
    for (int x = 0; x < f.cols; ++x) {
      // Division, not multiplication by 1/std: the same float32 rounding as torch's (x - mean) / std.
      p[x][0] = (p[x][0] - m0) / s0;
      p[x][1] = (p[x][1] - m1) / s1;
      p[x][2] = (p[x][2] - m2) / s2;
    }
  }
  return f;
}

cv::Mat pad(const cv::Mat& img, const PadStep& step, const DeployConfig& cfg) {
  int h = step.height > 0 ? step.height : (cfg.input_height() > 0 ? cfg.input_height() : img.rows);
  int w = step.width > 0 ? step.width : (cfg.input_width() > 0 ? cfg.input_width() : img.cols);
  if (step.size_divisor > 0) {
    h = (std::max(h, img.rows) + step.size_divisor - 1) / step.size_divisor * step.size_divisor;
    w = (std::max(w, img.cols) + step.size_divisor - 1) / step.size_divisor * step.size_divisor;
  }
  if (img.rows > h || img.cols > w)
    throw std::runtime_error(cfg.yaml_path + ": the resized image (" + std::to_string(img.cols) + "x" +
                             std::to_string(img.rows) + ") is larger than the model input (" + std::to_string(w) +
                             "x" + std::to_string(h) + "); check preprocess Resize vs input.shape");
  if (img.rows == h && img.cols == w) return img;
  cv::Mat out;
  cv::copyMakeBorder(img, out, 0, h - img.rows, 0, w - img.cols, cv::BORDER_CONSTANT, cv::Scalar(step.value[0], step.value[1], step.value[2]));
  return out;
}

}  // namespace

cv::Mat preprocess(const cv::Mat& bgr, const DeployConfig& cfg, ImageMeta& meta) {
  if (bgr.empty() || bgr.type() != CV_8UC3) throw std::runtime_error("preprocess: expected a BGR uint8 image");
  meta = ImageMeta{};
  meta.ori_h = bgr.rows;
  meta.ori_w = bgr.cols;
  cv::Mat img = bgr;
  bool normalized = false;
  for (const auto& step : cfg.preprocess) {
    switch (step.kind) {
      case PreprocessStep::Kind::Resize:
        img = resize(img, step.resize, meta);
        meta.img_h = img.rows;
        meta.img_w = img.cols;
        break;
      case PreprocessStep::Kind::Normalize:
        img = normalize(img, step.normalize);
        normalized = true;
        break;
      case PreprocessStep::Kind::Pad:
        if (meta.img_h == 0) {
          meta.img_h = img.rows;
          meta.img_w = img.cols;
        }
        img = pad(img, step.pad, cfg);
        break;
      case PreprocessStep::Kind::Permute:
        break;  // the blob below is always NCHW
    }
  }
  if (meta.img_h == 0) {
    meta.img_h = img.rows;
    meta.img_w = img.cols;
  }
  if (!normalized) img.convertTo(img, CV_32FC3);
  const int h = cfg.input_height(), w = cfg.input_width();
  if ((h > 0 && img.rows != h) || (w > 0 && img.cols != w))
    throw std::runtime_error(cfg.yaml_path + ": pre-processing gives " + std::to_string(img.cols) + "x" +
                             std::to_string(img.rows) + " but input.shape wants " + std::to_string(w) + "x" +
                             std::to_string(h) + " (W x H); add a Pad step or fix Resize.size");
  meta.pad_h = img.rows;
  meta.pad_w = img.cols;
  const int sizes[4] = {1, 3, img.rows, img.cols};
  cv::Mat blob(4, sizes, CV_32F);
  std::vector<cv::Mat> planes;
  for (int c = 0; c < 3; ++c) planes.emplace_back(img.rows, img.cols, CV_32F, blob.ptr<float>(0, c));
  cv::split(img, planes);  // writes straight into the blob's channel planes
  return blob;
}

}  // namespace oars
