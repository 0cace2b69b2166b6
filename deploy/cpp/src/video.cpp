// Video clips for the C++ predictor; see video.h. Every formula mirrors deploy/python/oars_deploy (clips/sampling.py,
// clips/preprocess.py), which the training pipeline runs too.
#include "video.h"

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <stdexcept>

namespace oars {
namespace {

// (w, h) * f rounded half up, at least 1 pixel (oars_deploy.preprocess.scaled_size)
cv::Size scaled_size(int w, int h, double f) {
  return {std::max(1, static_cast<int>(w * f + 0.5)), std::max(1, static_cast<int>(h * f + 0.5))};
}

cv::Size resize_size(int w, int h, const VideoStep& s) {
  if (s.short_side > 0) return scaled_size(w, h, static_cast<double>(s.short_side) / std::min(w, h));
  if (s.factor > 0) return scaled_size(w, h, s.factor);
  if (!s.keep_ratio) return {static_cast<int>(s.bound_w), static_cast<int>(s.bound_h)};
  const double hi = std::max(s.bound_w, s.bound_h), lo = std::min(s.bound_w, s.bound_h);
  return scaled_size(w, h, std::min(hi / std::max(w, h), lo / std::min(w, h)));
}

// torchvision's centre offset int(round(free / 2)): Python rounds ties to even, as nearbyint does by default
int centre_offset(int free) { return static_cast<int>(std::nearbyint(free / 2.0)); }

// The still-image format of a file's first bytes ("" when none), as oars_deploy.clips.inputs.sniff_still_image:
// FFmpeg opens a PNG or JPEG as a one-frame "video" whatever it is called, which would be classified into a motion
// class. Animated PNG (an acTL chunk before the first IDAT) and WebP (VP8X animation flag) are not still images.
std::string still_image_kind(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string head(4096, '\0');
  f.read(&head[0], static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  auto starts = [&](const std::string& sig) { return head.compare(0, sig.size(), sig) == 0; };
  if (starts(std::string("\x89PNG\r\n\x1a\n", 8))) {
    const size_t actl = head.find("acTL"), idat = head.find("IDAT");
    return actl != std::string::npos && (idat == std::string::npos || actl < idat) ? "" : "png";
  }
  if (starts("\xff\xd8\xff")) return "jpeg";
  if (starts("BM") && head.size() >= 10 && head.compare(6, 4, std::string(4, '\0')) == 0) return "bmp";
  if (starts(std::string("II*\0", 4)) || starts(std::string("MM\0*", 4))) return "tiff";
  if (starts("RIFF") && head.size() >= 12 && head.compare(8, 4, "WEBP") == 0)
    return head.size() > 20 && head.compare(12, 4, "VP8X") == 0 && (head[20] & 0x02) ? "" : "webp";
  return "";
}

}  // namespace

std::vector<int64_t> sample_frame_indices(int total, const SamplingSpec& s) {
  const int64_t starts = static_cast<int64_t>(total) - static_cast<int64_t>(s.clip_len) * s.frame_interval + 1;
  std::vector<int64_t> offsets;
  if (starts <= 0) {
    offsets.assign(s.num_clips * (s.twice_sample ? 2 : 1), 0);
  } else {
    const double seg = static_cast<double>(starts) / s.num_clips;
    for (int k = 0; k < s.num_clips; ++k) offsets.push_back(static_cast<int64_t>(k * seg + seg / 2.0));
    if (s.twice_sample)
      for (int k = 0; k < s.num_clips; ++k) offsets.push_back(static_cast<int64_t>(k * seg));
  }
  std::vector<int64_t> inds;
  for (int64_t off : offsets) {
    int64_t last_inside = off;
    for (int j = 0; j < s.clip_len; ++j) {
      int64_t i = off + static_cast<int64_t>(j) * s.frame_interval;
      if (s.loop) {
        i %= total;
      } else if (i >= total) {
        i = last_inside;  // repeat_last: the clip's last index inside the video
      } else {
        last_inside = i;
      }
      inds.push_back(i);
    }
  }
  return inds;
}

VideoClip load_video_clip(const std::string& path, const DeployConfig& cfg) {
  VideoClip clip;
  const std::string still = still_image_kind(path);
  if (!still.empty())
    throw std::runtime_error(path + " is a still image (" + still + "), not a video: a video model classifies the "
                             "motion across a clip's frames; video models take video files");
  // pass 1: count the frames by reading forward (the container's count can be an estimate)
  cv::VideoCapture counter(path, cv::CAP_FFMPEG);
  if (!counter.isOpened()) throw std::runtime_error("cannot open video " + path);
  while (counter.grab()) ++clip.total_frames;
  counter.release();
  if (clip.total_frames == 0) throw std::runtime_error(path + ": the video holds no frames");
  if (clip.total_frames < cfg.sampling.min_frames)
    throw std::runtime_error(path + ": " + std::to_string(clip.total_frames) + " frame" +
                             (clip.total_frames == 1 ? "" : "s") + ", but the sampling needs at least " +
                             std::to_string(cfg.sampling.min_frames) + " (min_frames " +
                             std::to_string(cfg.sampling.min_frames) + ")");
  clip.frame_inds = sample_frame_indices(clip.total_frames, cfg.sampling);

  // pass 2: decode forward, keep the sampled frames
  std::map<int64_t, cv::Mat> wanted;
  for (int64_t i : clip.frame_inds) wanted[i] = cv::Mat();
  cv::VideoCapture cap(path, cv::CAP_FFMPEG);
  if (!cap.isOpened()) throw std::runtime_error("cannot open video " + path);
  const int64_t last = wanted.rbegin()->first;
  for (int64_t i = 0; i <= last; ++i) {
    if (!cap.grab()) throw std::runtime_error(path + ": the stream ended before frame " + std::to_string(i));
    auto it = wanted.find(i);
    if (it != wanted.end()) {
      cv::Mat frame;
      cap.retrieve(frame);
      if (frame.empty() || frame.type() != CV_8UC3) throw std::runtime_error(path + ": frame " +
                                                                            std::to_string(i) + " is not BGR 8-bit");
      it->second = frame.clone();
    }
  }
  std::vector<cv::Mat> frames;
  for (int64_t i : clip.frame_inds) frames.push_back(wanted[i]);

  // spatial steps on every frame with one parameter set; crops multiply the frames views-major
  int crops = 1;
  const NormalizeStep* norm = nullptr;
  for (const auto& step : cfg.video_steps) {
    const int h = frames[0].rows, w = frames[0].cols;
    if (step.kind == VideoStep::Kind::Resize) {
      const cv::Size size = resize_size(w, h, step);
      if (size != cv::Size(w, h))
        for (auto& f : frames) {
          cv::Mat out;
          cv::resize(f, out, size, 0, 0, step.interpolation);
          f = out;
        }
    } else if (step.kind == VideoStep::Kind::CenterCrop || step.kind == VideoStep::Kind::ThreeCrop) {
      const int cw = step.crop_w, ch = step.crop_h;
      if (cw > w || ch > h) throw std::runtime_error(path + ": crop larger than the frames");
      const int fw = w - cw, fh = h - ch;
      std::vector<cv::Point> offsets;
      if (step.kind == VideoStep::Kind::CenterCrop) {
        offsets = {{centre_offset(fw), centre_offset(fh)}};
      } else if (fw >= fh) {
        offsets = {{0, centre_offset(fh)}, {fw, centre_offset(fh)}, {centre_offset(fw), centre_offset(fh)}};
      } else {
        offsets = {{centre_offset(fw), 0}, {centre_offset(fw), fh}, {centre_offset(fw), centre_offset(fh)}};
      }
      std::vector<cv::Mat> out;
      for (const auto& o : offsets)
        for (const auto& f : frames) out.push_back(f(cv::Rect(o.x, o.y, cw, ch)));
      frames = out;
      crops *= static_cast<int>(offsets.size());
    } else if (step.kind == VideoStep::Kind::Normalize) {
      norm = &step.normalize;
    }
  }
  const int n = static_cast<int>(frames.size()), h = frames[0].rows, w = frames[0].cols;
  if (cfg.input.shape[1] != n || cfg.input.shape[3] != h || cfg.input.shape[4] != w)
    throw std::runtime_error(path + ": pre-processing gives " + std::to_string(n) + " frames of " +
                             std::to_string(h) + "x" + std::to_string(w) + ", the model takes input.shape[1:] = [" +
                             std::to_string(cfg.input.shape[1]) + ", 3, " + std::to_string(cfg.input.shape[3]) + ", " +
                             std::to_string(cfg.input.shape[4]) + "]");
  const int sizes[5] = {1, n, 3, h, w};
  clip.blob = cv::Mat(5, sizes, CV_32F);
  float* dst = clip.blob.ptr<float>();
  const NormalizeStep none;
  const NormalizeStep& nz = norm ? *norm : none;
  for (int k = 0; k < n; ++k)
    for (int c = 0; c < 3; ++c) {
      const int src_c = nz.to_rgb ? 2 - c : c;  // BGR frames; channel c of the model input
      float* plane = dst + (static_cast<size_t>(k) * 3 + c) * h * w;
      for (int y = 0; y < h; ++y) {
        const cv::Vec3b* row = frames[k].ptr<cv::Vec3b>(y);
        for (int x = 0; x < w; ++x) plane[y * w + x] = (static_cast<float>(row[x][src_c]) - nz.mean[c]) / nz.std[c];
      }
    }
  return clip;
}

std::vector<int> top_k(const float* scores, int num_classes, int k) {
  std::vector<int> ids(num_classes);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  ids.resize(std::min(k, num_classes));
  return ids;
}

}  // namespace oars
