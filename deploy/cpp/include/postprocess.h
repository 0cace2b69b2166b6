// Model outputs -> results in original-image pixels, as deploy.yaml's postprocess section says.
#pragma once

#include "deploy_config.h"
#include "preprocess.h"

#include <opencv2/core.hpp>

#include <string>
#include <vector>

namespace oars {

struct Detection {
  float x1, y1, x2, y2, score;
  int label;
  int row = -1;   // the row of the padded in-graph outputs it came from (-1: from the predictor's own NMS)
  cv::Mat mask;   // CV_8U 0/1 at the original image size (mask models), else empty
};

// Segmentation: the label map (CV_32S) at the original image size. Handles `label` [B, H, W] (argmax in the
// graph) and `logits`/`prob` [B, C, H, W]: crop to the resized region, resize to the original (nearest for
// labels; for scores as postprocess.resize_to_original says), argmax (first maximum wins, as numpy/torch).
cv::Mat segmentation_labels(const std::vector<cv::Mat>& outputs, const DeployConfig& cfg, const ImageMeta& meta);

// Detection, sorted by decreasing score: in-graph NMS outputs (num_dets/boxes/scores/labels) are unpadded; raw
// outputs (boxes [B, N, 4], scores [B, N, C], optional objectness) go through score/conf thresholds, nms_pre,
// per-class NMS (cv::dnn::NMSBoxes) and max_per_img. Boxes are then divided by the scale factor and clipped.
std::vector<Detection> detections(const std::vector<cv::Mat>& outputs, const DeployConfig& cfg, const ImageMeta& meta);

// Mask models (postprocess.masks): each detection's [h, w] probabilities (its row of the masks output) pasted over
// its box (original pixels) into an ori_h x ori_w mask, >= mask_threshold: the sampling of the Python predictor
// (oars_deploy/mask_paste.py) and the PyTorch models (bilinear grid_sample over the box, zero outside the mask,
// 0 for pixels centred outside the box).
void add_masks(std::vector<Detection>& dets, const std::vector<cv::Mat>& outputs, const DeployConfig& cfg,
               const ImageMeta& meta);

// One mask pasted (exposed for tests): probs [mh, mw] CV_32F, box in the target image's pixels; mode "mmdet" or
// "torchvision" (torchvision's paste_masks_in_image: padded mask, widened integer box, F.interpolate positions).
cv::Mat paste_mask(const cv::Mat& probs, float x1, float y1, float x2, float y2, int img_h, int img_w,
                   float threshold, const std::string& mode = "mmdet");

// The pure NMS stage on one image (exposed for tests): boxes [N, 4] xyxy, scores [N, C], objectness [N] or empty.
std::vector<Detection> multiclass_nms(const float* boxes, const float* scores, const float* objectness, int n,
                                      int num_classes, const PostprocessSpec& spec, float clip_w, float clip_h);

}  // namespace oars
