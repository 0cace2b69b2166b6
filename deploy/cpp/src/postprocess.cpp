// Post-processing written to match the Python side (detection/models/heads/yolov3_head.py predict_by_feat and
// multiclass_nms; the segmentor's crop + resize) so the C++ and Python predictors agree to float precision.
#include "postprocess.h"

#include <opencv2/dnn.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace oars {
namespace {

int first_output(const DeployConfig& cfg, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    int i = cfg.output_index(n);
    if (i >= 0) return i;
  }
  return -1;
}

// [C, H, W] scores -> [H, W] CV_32S labels, first maximum wins.
cv::Mat argmax(const std::vector<cv::Mat>& planes) {
  cv::Mat labels(planes[0].size(), CV_32S, cv::Scalar(0));
  cv::Mat best = planes[0].clone();
  for (int c = 1; c < static_cast<int>(planes.size()); ++c) {
    cv::Mat mask = planes[c] > best;
    planes[c].copyTo(best, mask);
    labels.setTo(c, mask);
  }
  return labels;
}

}  // namespace

cv::Mat segmentation_labels(const std::vector<cv::Mat>& outputs, const DeployConfig& cfg, const ImageMeta& meta) {
  int idx = first_output(cfg, {"label", "logits", "prob"});
  if (idx < 0) idx = 0;
  const cv::Mat& out = outputs.at(idx);
  const cv::Rect valid(0, 0, meta.img_w, meta.img_h);
  const cv::Size original(meta.ori_w, meta.ori_h);
  const bool is_labels = out.dims == 3 || (out.dims == 4 && out.size[1] == 1 && out.depth() == CV_32S);
  if (is_labels) {
    const int h = out.size[out.dims - 2], w = out.size[out.dims - 1];
    cv::Mat labels(h, w, CV_32S);
    if (out.depth() == CV_32S) {
      std::memcpy(labels.data, out.ptr(), sizeof(int) * h * w);
    } else {
      cv::Mat(h, w, CV_32F, const_cast<float*>(out.ptr<float>())).convertTo(labels, CV_32S);
    }
    if (valid.width > w || valid.height > h) throw std::runtime_error("segmentation output smaller than the input");
    cv::Mat cropped = labels(valid), resized;
    cv::resize(cropped, resized, original, 0, 0, cv::INTER_NEAREST);
    return resized;
  }
  if (out.dims != 4) throw std::runtime_error("segmentation output must be [B, H, W] labels or [B, C, H, W] scores");
  const int c = out.size[1], h = out.size[2], w = out.size[3];
  const int interp = cfg.postprocess.resize_to_original == "bilinear" ? cv::INTER_LINEAR : cv::INTER_NEAREST;
  std::vector<cv::Mat> planes;
  for (int k = 0; k < c; ++k) {
    cv::Mat plane(h, w, CV_32F, const_cast<float*>(out.ptr<float>(0, k))), resized;
    cv::resize(plane(valid), resized, original, 0, 0, interp);
    planes.push_back(resized);
  }
  return argmax(planes);
}

std::vector<Detection> multiclass_nms(const float* boxes, const float* scores, const float* objectness, int n,
                                      int num_classes, const PostprocessSpec& spec, float clip_w, float clip_h) {
  struct Candidate {
    int box, label;
    float score;
  };
  std::vector<Candidate> cands;
  for (int i = 0; i < n; ++i) {
    if (objectness && !(objectness[i] > spec.conf_thr)) continue;
    for (int c = 0; c < num_classes; ++c) {
      const float s = scores[static_cast<size_t>(i) * num_classes + c];
      if (s > spec.score_thr) cands.push_back({i, c, s});
    }
  }
  if (spec.nms_pre > 0 && static_cast<int>(cands.size()) > spec.nms_pre) {
    std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    cands.resize(spec.nms_pre);
  }
  // Per-class NMS (the same result as torchvision's batched_nms, without its coordinate-offset trick). Boxes
  // without area bypass OpenCV: torchvision's IoU with them is 0 (NaN for two), so they neither suppress nor are
  // suppressed, while cv::dnn::NMSBoxes calls two empty boxes anywhere identical.
  std::vector<Detection> kept;
  for (int c = 0; c < num_classes; ++c) {
    std::vector<cv::Rect2d> rects;
    std::vector<float> class_scores;
    std::vector<cv::Vec4f> xyxy;
    for (const auto& cand : cands) {
      if (cand.label != c) continue;
      const float* b = boxes + static_cast<size_t>(cand.box) * 4;
      const float x1 = std::clamp(b[0], 0.f, clip_w), y1 = std::clamp(b[1], 0.f, clip_h);
      const float x2 = std::clamp(b[2], 0.f, clip_w), y2 = std::clamp(b[3], 0.f, clip_h);
      if (!(x2 > x1) || !(y2 > y1)) {
        kept.push_back({x1, y1, x2, y2, cand.score, c, -1, cv::Mat()});
        continue;
      }
      rects.emplace_back(x1, y1, x2 - x1, y2 - y1);
      class_scores.push_back(cand.score);
      xyxy.emplace_back(x1, y1, x2, y2);
    }
    if (rects.empty()) continue;
    std::vector<int> keep;
    cv::dnn::NMSBoxes(rects, class_scores, 0.f, spec.iou_threshold, keep);  // candidates are already > score_thr
    for (int k : keep) kept.push_back({xyxy[k][0], xyxy[k][1], xyxy[k][2], xyxy[k][3], class_scores[k], c, -1, cv::Mat()});
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Detection& a, const Detection& b) { return a.score > b.score; });
  if (spec.max_per_img > 0 && static_cast<int>(kept.size()) > spec.max_per_img) kept.resize(spec.max_per_img);
  return kept;
}

namespace {

// Interpolation weights [stop - start, size] of image pixels start..stop-1 along one box axis [lo, hi] over a
// mask axis of `size` cells: grid_sample's align_corners=False frame, taps outside the mask dropped (zero
// padding), rows of pixels centred outside the box all 0. float32 arithmetic in the Python predictor's order.
cv::Mat axis_weights(int start, int stop, float lo, float hi, int size) {
  cv::Mat w(stop - start, size, CV_32F, cv::Scalar(0));
  for (int p = start; p < stop; ++p) {
    const float g = (static_cast<float>(p) + 0.5f - lo) / (hi - lo) * 2.f - 1.f;
    if (!(std::fabs(g) <= 1.f)) continue;
    const float u = ((g + 1.f) * static_cast<float>(size) - 1.f) / 2.f;
    const int i0 = static_cast<int>(std::floor(u));
    const float frac = u - static_cast<float>(i0);
    float* row = w.ptr<float>(p - start);
    if (i0 >= 0 && i0 < size) row[i0] = 1.f - frac;
    if (i0 + 1 >= 0 && i0 + 1 < size) row[i0 + 1] = frac;
  }
  return w;
}

// torchvision mode: weights [stop - start, size] of image pixels start..stop-1 for a mask axis of `size` resized
// by F.interpolate (bilinear, align_corners=False) onto the integer box pixels b0..b1 (inclusive).
cv::Mat interpolate_weights(int start, int stop, int b0, int b1, int size) {
  const int length = std::max(b1 - b0 + 1, 1);
  const float scale = static_cast<float>(size) / static_cast<float>(length);
  cv::Mat w(stop - start, size, CV_32F, cv::Scalar(0));
  for (int p = start; p < stop; ++p) {
    const int dst = p - b0;
    if (dst < 0 || dst >= length) continue;
    const float src = std::max(scale * (static_cast<float>(dst) + 0.5f) - 0.5f, 0.f);
    const int i0 = std::min(static_cast<int>(std::floor(src)), size - 1);
    const float w1 = std::clamp(src - static_cast<float>(i0), 0.f, 1.f);
    const int i1 = i0 < size - 1 ? i0 + 1 : i0;
    float* row = w.ptr<float>(p - start);
    row[i0] = 1.f - w1;
    row[i1] += w1;
  }
  return w;
}

cv::Mat paste_torchvision(const cv::Mat& probs, float x1, float y1, float x2, float y2, int img_h, int img_w,
                          float threshold) {
  cv::Mat out(img_h, img_w, CV_8U, cv::Scalar(0));
  cv::Mat padded;
  cv::copyMakeBorder(probs, padded, 1, 1, 1, 1, cv::BORDER_CONSTANT, cv::Scalar(0));
  const float scale = static_cast<float>(probs.cols + 2) / static_cast<float>(probs.cols);
  const float hw = (x2 - x1) * 0.5f * scale, hh = (y2 - y1) * 0.5f * scale;
  const float cx = (x2 + x1) * 0.5f, cy = (y2 + y1) * 0.5f;
  // truncated toward zero, as torchvision's Tensor.to(torch.int64)
  const int bx1 = static_cast<int>(cx - hw), by1 = static_cast<int>(cy - hh);
  const int bx2 = static_cast<int>(cx + hw), by2 = static_cast<int>(cy + hh);
  const int xa = std::max(bx1, 0), ya = std::max(by1, 0);
  const int xb = std::min(std::max(bx2, bx1) + 1, img_w), yb = std::min(std::max(by2, by1) + 1, img_h);
  if (xb <= xa || yb <= ya) return out;
  const cv::Mat window = interpolate_weights(ya, yb, by1, by2, padded.rows) * padded *
                         interpolate_weights(xa, xb, bx1, bx2, padded.cols).t();
  cv::Mat binary = window >= threshold;
  binary.convertTo(out(cv::Rect(xa, ya, xb - xa, yb - ya)), CV_8U, 1.0 / 255.0);
  return out;
}

}  // namespace

cv::Mat paste_mask(const cv::Mat& probs, float x1, float y1, float x2, float y2, int img_h, int img_w,
                   float threshold, const std::string& mode) {
  if (mode == "torchvision") return paste_torchvision(probs, x1, y1, x2, y2, img_h, img_w, threshold);
  cv::Mat out(img_h, img_w, CV_8U, cv::Scalar(0));
  const int xa = std::max(0, static_cast<int>(std::floor(x1))), ya = std::max(0, static_cast<int>(std::floor(y1)));
  const int xb = std::min(img_w, static_cast<int>(std::ceil(x2))), yb = std::min(img_h, static_cast<int>(std::ceil(y2)));
  if (xb <= xa || yb <= ya || !(x2 > x1 && y2 > y1)) return out;  // an empty box pastes nothing
  const cv::Mat wy = axis_weights(ya, yb, y1, y2, probs.rows);
  const cv::Mat wx = axis_weights(xa, xb, x1, x2, probs.cols);
  const cv::Mat window = wy * probs * wx.t();  // [yb - ya, xb - xa]
  cv::Mat binary = window >= threshold;        // 255 / 0
  binary.convertTo(out(cv::Rect(xa, ya, xb - xa, yb - ya)), CV_8U, 1.0 / 255.0);
  return out;
}

void add_masks(std::vector<Detection>& dets, const std::vector<cv::Mat>& outputs, const DeployConfig& cfg,
               const ImageMeta& meta) {
  const auto& pp = cfg.postprocess;
  if (pp.mask_output.empty()) return;
  const cv::Mat& masks = outputs.at(cfg.output_index(pp.mask_output));
  if (masks.dims != 4 || masks.depth() != CV_32F)
    throw std::runtime_error(cfg.yaml_path + ": output '" + pp.mask_output + "' must be float32 [B, M, h, w]");
  const int m = masks.size[1], h = masks.size[2], w = masks.size[3];
  for (auto& d : dets) {
    if (d.row < 0 || d.row >= m) throw std::runtime_error("a detection without a row of the masks output");
    const cv::Mat probs(h, w, CV_32F, const_cast<float*>(masks.ptr<float>(0, d.row)));
    d.mask = paste_mask(probs, d.x1, d.y1, d.x2, d.y2, meta.ori_h, meta.ori_w, pp.mask_threshold, pp.mask_paste);
  }
}

std::vector<Detection> detections(const std::vector<cv::Mat>& outputs, const DeployConfig& cfg, const ImageMeta& meta) {
  const auto& pp = cfg.postprocess;
  std::vector<Detection> dets;
  const int i_boxes = first_output(cfg, {"boxes", "bboxes", "dets"});
  const int i_scores = first_output(cfg, {"scores"});
  if (i_boxes < 0 || i_scores < 0)
    throw std::runtime_error(cfg.yaml_path + ": detection outputs must include 'boxes' and 'scores'");
  const cv::Mat& boxes = outputs.at(i_boxes);
  const cv::Mat& scores = outputs.at(i_scores);
  const int i_num = first_output(cfg, {"num_dets"});
  const int i_labels = first_output(cfg, {"labels"});
  if (pp.has("nms") || i_num >= 0) {
    if (i_labels < 0) throw std::runtime_error(cfg.yaml_path + ": in-graph NMS outputs must include 'labels'");
    const int m = boxes.size[1];
    int num = m;
    if (i_num >= 0) {
      const cv::Mat& nd = outputs.at(i_num);
      num = nd.depth() == CV_32S ? nd.ptr<int>()[0] : static_cast<int>(nd.ptr<float>()[0] + 0.5f);
    }
    const float* b = boxes.ptr<float>();
    const float* s = scores.ptr<float>();
    const cv::Mat& lm = outputs.at(i_labels);
    for (int k = 0; k < std::min(num, m); ++k) {
      const int label = lm.depth() == CV_32S ? lm.ptr<int>()[k] : static_cast<int>(lm.ptr<float>()[k] + 0.5f);
      if (label < 0) continue;  // padding
      dets.push_back({b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3], s[k], label, k, cv::Mat()});
    }
  } else {
    const int n = boxes.size[1];
    const int c = scores.dims >= 3 ? scores.size[2] : 1;
    const int i_obj = first_output(cfg, {"objectness", "obj"});
    const float* obj = i_obj >= 0 ? outputs.at(i_obj).ptr<float>() : nullptr;
    dets = multiclass_nms(boxes.ptr<float>(), scores.ptr<float>(), obj, n, c, pp, static_cast<float>(meta.img_w),
                          static_cast<float>(meta.img_h));
  }
  // Input pixels -> original pixels, clipped to the image (predict_by_feat with rescale=True).
  const float sw = static_cast<float>(meta.scale_w), sh = static_cast<float>(meta.scale_h);
  const float ow = static_cast<float>(meta.ori_w), oh = static_cast<float>(meta.ori_h);
  for (auto& d : dets) {
    d.x1 = std::min(std::max(d.x1 / sw, 0.f), ow);
    d.y1 = std::min(std::max(d.y1 / sh, 0.f), oh);
    d.x2 = std::min(std::max(d.x2 / sw, 0.f), ow);
    d.y2 = std::min(std::max(d.y2 / sh, 0.f), oh);
  }
  add_masks(dets, outputs, cfg, meta);  // over the boxes in original pixels, as the Python predictor
  return dets;
}

}  // namespace oars
