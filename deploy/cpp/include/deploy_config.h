// deploy.yaml, parsed once into plain structs (the schema is written by oars/export/deploy_config.py).
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace oars {

struct ResizeStep {
  int width = 0, height = 0;   // size: [W, H]
  bool keep_ratio = false;     // fit inside (W, H): scale by min(W / w, H / h), sizes rounded half up
  int interpolation = 1;       // cv::INTER_LINEAR
};

struct NormalizeStep {
  float mean[3] = {0.f, 0.f, 0.f};
  float std[3] = {1.f, 1.f, 1.f};
  bool to_rgb = false;
};

struct PadStep {
  int width = 0, height = 0;   // size: [W, H]; 0 = none (then the input spec or size_divisor decides)
  int size_divisor = 0;        // informational (W and H are multiples of it)
  float value[3] = {0.f, 0.f, 0.f};  // per channel of the (normalised) image
};

struct PreprocessStep {
  enum class Kind { Resize, Normalize, Pad, Permute } kind;
  ResizeStep resize;
  NormalizeStep normalize;
  PadStep pad;
};

// Video (clip) models: deploy.yaml's `sampling` section and video preprocess steps (oars_deploy.clips).
struct SamplingSpec {
  bool enabled = false;        // deploy.yaml has a sampling section
  int clip_len = 1, frame_interval = 1, num_clips = 1;
  bool loop = true;            // out_of_bound_opt: loop (else repeat_last)
  bool twice_sample = false;
  int min_frames = 2;          // fewer frames is an error (oars_deploy.clips.sampling.check_frame_count)
};

struct VideoStep {
  enum class Kind { Resize, CenterCrop, ThreeCrop, Normalize, FormatShape } kind;
  int short_side = 0;                  // Resize: short side -> this (0: use scale)
  double factor = 0;                   // Resize: scale as a factor (0: use bounds)
  double bound_w = 0, bound_h = 0;     // Resize: scale [w, h] (-1 = unbounded -> infinity)
  bool keep_ratio = true;
  int interpolation = 1;
  int crop_w = 0, crop_h = 0;          // CenterCrop / ThreeCrop size [w, h]
  NormalizeStep normalize;
  std::string input_format = "NCHW";   // FormatShape
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // -1 = dynamic
  std::string dtype;
};

struct PostprocessSpec {
  std::string type;                     // segmentation | detection
  // segmentation
  std::string output_op = "argmax";     // argmax | softmax | none
  std::string resize_to_original = "nearest";
  // detection
  std::vector<std::string> inside_graph;
  float score_thr = 0.f, conf_thr = 0.f, iou_threshold = 0.45f;
  int max_per_img = 100, nms_pre = 1000;
  // instance masks (postprocess.masks): the output holding [B, M, h, w] probabilities per detection, pasted over
  // each box in the original image and thresholded; empty mask_output = a box-only model
  std::string mask_output;
  float mask_threshold = 0.5f;
  std::string mask_paste = "mmdet";
  bool has(const std::string& step) const;
};

struct DeployConfig {
  std::string model_dir, yaml_path;
  std::string model_name, task, onnx_file, onnx_fp32_file, engine_file;
  // the runtime plug-in that runs the model (deploy.yaml's `predictor`, inferred for older exports as
  // oars_deploy.plugins.predictor_kind does): semantic_labels, detection_boxes, instance_masks or clip_classes here
  std::string predictor;
  std::vector<std::string> labels;
  std::vector<cv::Vec3b> palette;       // RGB, one per label
  TensorSpec input;
  std::vector<PreprocessStep> preprocess;
  SamplingSpec sampling;                // video models only
  std::vector<VideoStep> video_steps;   // video models only (instead of preprocess)
  std::vector<TensorSpec> outputs;
  PostprocessSpec postprocess;

  std::string onnx_path() const { return model_dir + "/" + onnx_file; }
  // the FP32 graph (model.onnx) even after an FP16/INT8 export, whose reduced graph deploy.yaml's model.onnx names
  std::string onnx_fp32_path() const { return model_dir + "/" + onnx_fp32_file; }
  std::string engine_path() const { return model_dir + "/" + engine_file; }
  int input_height() const { return static_cast<int>(input.shape.size() == 4 ? input.shape[2] : -1); }
  int input_width() const { return static_cast<int>(input.shape.size() == 4 ? input.shape[3] : -1); }
  int output_index(const std::string& name) const;  // -1 when absent
};

// Reads MODEL_DIR/deploy.yaml; throws std::runtime_error naming the file, key and what was expected.
DeployConfig load_deploy_config(const std::string& model_dir);

}  // namespace oars
