#include "visualize.h"

#include <opencv2/imgproc.hpp>

#include <cstdio>

namespace oars {

cv::Vec3b label_color_bgr(const DeployConfig& cfg, int label) {
  if (label >= 0 && label < static_cast<int>(cfg.palette.size())) {
    const cv::Vec3b& rgb = cfg.palette[label];
    return {rgb[2], rgb[1], rgb[0]};
  }
  // A fixed pseudo-random colour for labels without a palette entry.
  const unsigned h = static_cast<unsigned>(label) * 2654435761u;
  return {static_cast<uchar>(h & 255), static_cast<uchar>((h >> 8) & 255), static_cast<uchar>((h >> 16) & 255)};
}

cv::Mat draw_detections(const cv::Mat& bgr, const std::vector<Detection>& dets, const DeployConfig& cfg) {
  cv::Mat out = bgr.clone();
  // Instance masks first (lowest score first, so higher scores end on top), filled at half opacity.
  for (auto it = dets.rbegin(); it != dets.rend(); ++it) {
    if (it->mask.empty() || it->mask.size() != out.size()) continue;
    const cv::Rect box = cv::boundingRect(it->mask);  // the blend touches the mask's pixels only
    if (box.area() == 0) continue;
    const cv::Vec3b c = label_color_bgr(cfg, it->label);
    cv::Mat region = out(box), blended;
    cv::addWeighted(region, 0.5, cv::Mat(box.size(), CV_8UC3, cv::Scalar(c[0], c[1], c[2])), 0.5, 0.0, blended);
    blended.copyTo(region, it->mask(box));
  }
  const int thickness = std::max(1, std::min(out.rows, out.cols) / 300);
  const double font = std::max(0.35, std::min(out.rows, out.cols) / 800.0);
  for (const auto& d : dets) {
    const cv::Vec3b c = label_color_bgr(cfg, d.label);
    const cv::Scalar color(c[0], c[1], c[2]);
    cv::rectangle(out, cv::Point(cvRound(d.x1), cvRound(d.y1)), cv::Point(cvRound(d.x2), cvRound(d.y2)), color,
                  thickness);
    const std::string name = d.label < static_cast<int>(cfg.labels.size()) ? cfg.labels[d.label]
                                                                            : std::to_string(d.label);
    char text[128];
    std::snprintf(text, sizeof(text), "%s %.2f", name.c_str(), d.score);
    int baseline = 0;
    const cv::Size ts = cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, font, 1, &baseline);
    const cv::Point org(cvRound(d.x1), std::max(ts.height + 2, cvRound(d.y1)));
    cv::rectangle(out, org + cv::Point(0, baseline - ts.height - 2), org + cv::Point(ts.width, baseline), color,
                  cv::FILLED);
    cv::putText(out, text, org, cv::FONT_HERSHEY_SIMPLEX, font, cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
  }
  return out;
}

cv::Mat draw_segmentation(const cv::Mat& bgr, const cv::Mat& labels, const DeployConfig& cfg, double alpha) {
  cv::Mat colour(bgr.size(), CV_8UC3);
  for (int y = 0; y < labels.rows; ++y) {
    const int* l = labels.ptr<int>(y);
    auto* c = colour.ptr<cv::Vec3b>(y);
    for (int x = 0; x < labels.cols; ++x) c[x] = label_color_bgr(cfg, l[x]);
  }
  cv::Mat out;
  cv::addWeighted(bgr, 1.0 - alpha, colour, alpha, 0.0, out);
  return out;
}

}  // namespace oars
