// deploy.yaml -> DeployConfig. Every missing or malformed key is an error naming file, key and expectation,
// so a deploy.yaml from a different exporter version fails loudly instead of pre-processing wrongly.
#include "deploy_config.h"

#include <opencv2/imgproc.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <tuple>

namespace oars {
namespace {

[[noreturn]] void fail(const std::string& file, const std::string& key, const std::string& what) {
  throw std::runtime_error(file + ": key '" + key + "': " + what);
}

template <typename T>
T get(const YAML::Node& node, const std::string& key, const std::string& file, const std::string& path) {
  if (!node[key]) fail(file, path + key, "missing");
  try {
    return node[key].as<T>();
  } catch (const YAML::Exception& e) {
    fail(file, path + key, std::string("has the wrong type (") + e.what() + ")");
  }
}

template <typename T>
T get_or(const YAML::Node& node, const std::string& key, T fallback) {
  return node[key] && !node[key].IsNull() ? node[key].as<T>() : fallback;
}

void get3(const YAML::Node& node, const std::string& key, float out[3], const std::string& file,
          const std::string& path) {
  auto values = get<std::vector<float>>(node, key, file, path);
  if (values.size() == 1) values.assign(3, values[0]);
  if (values.size() != 3) fail(file, path + key, "expected 3 values (one per channel)");
  std::copy(values.begin(), values.end(), out);
}

std::pair<int, int> get_size(const YAML::Node& node, const std::string& key, const std::string& file,
                             const std::string& path) {
  const YAML::Node v = node[key];
  if (v.IsScalar()) {
    int s = v.as<int>();
    return {s, s};
  }
  auto pair = get<std::vector<int>>(node, key, file, path);
  if (pair.size() != 2) fail(file, path + key, "expected [W, H]");
  return {pair[0], pair[1]};
}

int interpolation(const std::string& name, const std::string& file, const std::string& key) {
  if (name == "linear" || name == "bilinear") return cv::INTER_LINEAR;
  if (name == "nearest") return cv::INTER_NEAREST;
  if (name == "cubic" || name == "bicubic") return cv::INTER_CUBIC;
  if (name == "area") return cv::INTER_AREA;
  fail(file, key, "unknown interpolation '" + name + "' (expected linear, nearest, cubic or area)");
}

TensorSpec tensor_spec(const YAML::Node& node, const std::string& file, const std::string& path) {
  TensorSpec spec;
  spec.name = get<std::string>(node, "name", file, path);
  if (node["shape"]) {
    for (const auto& d : node["shape"]) {
      // Dynamic axes may be written as -1 or as a name ('batch').
      int64_t v = -1;
      try {
        v = d.as<int64_t>();
      } catch (const YAML::Exception&) {
        v = -1;
      }
      spec.shape.push_back(v);
    }
  }
  spec.dtype = get_or<std::string>(node, "dtype", "float32");
  return spec;
}

PreprocessStep preprocess_step(const YAML::Node& node, const std::string& file, const std::string& path) {
  PreprocessStep step{};
  const auto type = get<std::string>(node, "type", file, path);
  if (type == "Resize") {
    step.kind = PreprocessStep::Kind::Resize;
    auto [w, h] = get_size(node, "size", file, path);
    step.resize.width = w;
    step.resize.height = h;
    step.resize.keep_ratio = get_or<bool>(node, "keep_ratio", false);
    step.resize.interpolation =
        interpolation(get_or<std::string>(node, "interpolation", "linear"), file, path + "interpolation");
  } else if (type == "Normalize") {
    step.kind = PreprocessStep::Kind::Normalize;
    get3(node, "mean", step.normalize.mean, file, path);
    get3(node, "std", step.normalize.std, file, path);
    step.normalize.to_rgb = get_or<bool>(node, "to_rgb", false);
  } else if (type == "Pad") {
    step.kind = PreprocessStep::Kind::Pad;
    if (node["size"] && !node["size"].IsNull()) {
      auto [w, h] = get_size(node, "size", file, path);
      step.pad.width = w;
      step.pad.height = h;
    }
    step.pad.size_divisor = get_or<int>(node, "size_divisor", 0);
    if (node["value"] && node["value"].IsSequence()) {
      get3(node, "value", step.pad.value, file, path);
    } else {
      const float v = get_or<float>(node, "value", 0.f);
      std::fill(step.pad.value, step.pad.value + 3, v);
    }
  } else if (type == "Permute") {
    step.kind = PreprocessStep::Kind::Permute;
  } else {
    fail(file, path + "type", "unsupported pre-processing step '" + type +
                                  "' (this predictor knows Resize, Normalize, Pad, Permute)");
  }
  return step;
}

VideoStep video_step(const YAML::Node& node, const std::string& file, const std::string& path) {
  VideoStep step{};
  const std::string type = get<std::string>(node, "type", file, path);
  if (type == "Resize") {
    step.kind = VideoStep::Kind::Resize;
    step.interpolation = interpolation(get_or<std::string>(node, "interpolation", "bilinear"), file,
                                       path + "interpolation");
    step.keep_ratio = get_or<bool>(node, "keep_ratio", true);
    if (node["short_side"]) {
      step.short_side = get<int>(node, "short_side", file, path);
    } else if (node["scale"] && node["scale"].IsScalar()) {
      step.factor = get<double>(node, "scale", file, path);
    } else {
      auto b = get<std::vector<double>>(node, "scale", file, path);
      if (b.size() != 2) fail(file, path + "scale", "expected [w, h] or a factor");
      const double inf = std::numeric_limits<double>::infinity();
      step.bound_w = b[0] == -1 ? inf : b[0];
      step.bound_h = b[1] == -1 ? inf : b[1];
    }
  } else if (type == "CenterCrop" || type == "ThreeCrop") {
    step.kind = type == "CenterCrop" ? VideoStep::Kind::CenterCrop : VideoStep::Kind::ThreeCrop;
    std::tie(step.crop_w, step.crop_h) = get_size(node, "size", file, path);
  } else if (type == "Normalize") {
    step.kind = VideoStep::Kind::Normalize;
    get3(node, "mean", step.normalize.mean, file, path);
    get3(node, "std", step.normalize.std, file, path);
    step.normalize.to_rgb = get_or<bool>(node, "to_rgb", false);
  } else if (type == "FormatShape") {
    step.kind = VideoStep::Kind::FormatShape;
    step.input_format = get<std::string>(node, "input_format", file, path);
  } else {
    fail(file, path + "type", "unsupported video pre-processing step '" + type +
                                  "' (this predictor knows Resize, CenterCrop, ThreeCrop, Normalize, FormatShape)");
  }
  return step;
}

// A video (clip) model: sampling, a [B, V*T, 3, H, W] NTCHW input (2D recognizers: TSN/TSM), video steps.
void load_video(const YAML::Node& root, const std::string& file, DeployConfig& cfg) {
  const YAML::Node s = root["sampling"];
  auto& sp = cfg.sampling;
  sp.enabled = true;
  sp.clip_len = get<int>(s, "clip_len", file, "sampling.");
  sp.frame_interval = get_or<int>(s, "frame_interval", 1);
  sp.num_clips = get_or<int>(s, "num_clips", 1);
  const std::string oob = get_or<std::string>(s, "out_of_bound_opt", "loop");
  if (oob != "loop" && oob != "repeat_last") fail(file, "sampling.out_of_bound_opt", "expected loop or repeat_last");
  sp.loop = oob == "loop";
  sp.twice_sample = get_or<bool>(s, "twice_sample", false);
  sp.min_frames = get_or<int>(s, "min_frames", 2);
  if (sp.clip_len < 1 || sp.frame_interval < 1 || sp.num_clips < 1 || sp.min_frames < 1)
    fail(file, "sampling", "clip_len, frame_interval, num_clips and min_frames must be positive");
  const std::string layout = get_or<std::string>(root["input"], "layout", "NTCHW");
  if (layout != "NTCHW" || cfg.input.shape.size() != 5)
    fail(file, "input.layout", "this predictor classifies videos with 2D recognizers (TSN/TSM: NTCHW, [B, V*T, 3, H, "
                               "W]), got " + layout + "; use the Python predictor (oars-infer) for 3D models");
  if (!root["preprocess"] || !root["preprocess"].IsSequence()) fail(file, "preprocess", "missing (a list of steps)");
  int i = 0;
  for (const auto& n : root["preprocess"])
    cfg.video_steps.push_back(video_step(n, file, "preprocess[" + std::to_string(i++) + "]."));
  if (cfg.video_steps.empty() || cfg.video_steps.back().kind != VideoStep::Kind::FormatShape ||
      cfg.video_steps.back().input_format != "NCHW")
    fail(file, "preprocess", "the last video step must be FormatShape with input_format NCHW");
}

}  // namespace

bool PostprocessSpec::has(const std::string& step) const {
  return std::find(inside_graph.begin(), inside_graph.end(), step) != inside_graph.end();
}

int DeployConfig::output_index(const std::string& name) const {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].name == name) return static_cast<int>(i);
  return -1;
}

// deploy.yaml's `predictor` (which plug-in runs the model), or for an export written before that key the one its
// content implies (the rule of oars_deploy.plugins.predictor_kind). This predictor runs four of them; any other
// (GAN generators, frame-feature classifiers, a plug-in of another distribution) is one message naming it.
static std::string predictor_of(const YAML::Node& root, const std::string& file) {
  static const std::vector<std::string> kRuns{"semantic_labels", "detection_boxes", "instance_masks", "clip_classes"};
  std::string name = get_or<std::string>(root, "predictor", "");
  if (name.empty()) {
    const YAML::Node post = root["postprocess"];
    const std::string type = post && post["type"] ? post["type"].as<std::string>() : "";
    if (root["gan"]) name = "gan_images";
    else if (root["features"]) name = "feature_classes";
    else if (root["sampling"]) name = "clip_classes";
    else if (type == "detection") name = post["masks"] ? "instance_masks" : "detection_boxes";
    else if (type == "segmentation") name = "semantic_labels";
    else fail(file, "predictor", "missing, and the content names no predictor this program runs (postprocess.type '" +
                                     type + "')");
  }
  if (std::find(kRuns.begin(), kRuns.end(), name) == kRuns.end())
    fail(file, "predictor", "'" + name + "' is not run by the C++ predictor (it runs semantic_labels, "
                            "detection_boxes, instance_masks and clip_classes); run this export with oars-infer "
                            "(pip install deploy/python)");
  return name;
}

DeployConfig load_deploy_config(const std::string& model_dir) {
  DeployConfig cfg;
  cfg.model_dir = model_dir;
  cfg.yaml_path = model_dir + "/deploy.yaml";
  const std::string& file = cfg.yaml_path;
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::BadFile&) {
    throw std::runtime_error(file + ": cannot read it (is --model-dir the folder written by tools/export.py?)");
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(file + ": not valid YAML: " + e.what());
  }
  const int version = get_or<int>(root, "version", 1);
  if (version != 1) fail(file, "version", "this predictor reads version 1, got " + std::to_string(version));

  const YAML::Node model = root["model"];
  if (!model) fail(file, "model", "missing");
  cfg.model_name = get_or<std::string>(model, "name", "model");
  cfg.task = get<std::string>(model, "task", file, "model.");
  cfg.onnx_file = get_or<std::string>(model, "onnx", "model.onnx");
  cfg.onnx_fp32_file = get_or<std::string>(model, "onnx_fp32", cfg.onnx_file);
  cfg.engine_file = get_or<std::string>(model, "engine", "model.engine");

  if (root["labels"]) cfg.labels = root["labels"].as<std::vector<std::string>>();
  if (root["palette"]) {
    for (const auto& c : root["palette"]) {
      auto rgb = c.as<std::vector<int>>();
      if (rgb.size() != 3) fail(file, "palette", "expected [R, G, B] per label");
      cfg.palette.emplace_back(rgb[0], rgb[1], rgb[2]);
    }
  }

  if (!root["input"]) fail(file, "input", "missing");
  cfg.predictor = predictor_of(root, file);  // before the sections: another plug-in's export is refused by name
  cfg.input = tensor_spec(root["input"], file, "input.");
  if (root["sampling"]) {
    load_video(root, file, cfg);
  } else {
    if (cfg.input.shape.size() != 4) fail(file, "input.shape", "expected [B, C, H, W]");
    const std::string layout = get_or<std::string>(root["input"], "layout", "NCHW");
    if (layout != "NCHW") fail(file, "input.layout", "this predictor feeds NCHW, got " + layout);
    const std::string color = get_or<std::string>(root["input"], "color", "BGR");
    if (color != "BGR") fail(file, "input.color", "this predictor reads images as BGR with OpenCV, got " + color);

    if (!root["preprocess"] || !root["preprocess"].IsSequence()) fail(file, "preprocess", "missing (a list of steps)");
    int i = 0;
    for (const auto& s : root["preprocess"])
      cfg.preprocess.push_back(preprocess_step(s, file, "preprocess[" + std::to_string(i++) + "]."));
  }

  if (!root["outputs"] || !root["outputs"].IsSequence()) fail(file, "outputs", "missing (a list of tensors)");
  int i = 0;
  for (const auto& o : root["outputs"])
    cfg.outputs.push_back(tensor_spec(o, file, "outputs[" + std::to_string(i++) + "]."));

  const YAML::Node post = root["postprocess"];
  if (!post) fail(file, "postprocess", "missing");
  auto& pp = cfg.postprocess;
  pp.type = get<std::string>(post, "type", file, "postprocess.");
  if (pp.type != "segmentation" && pp.type != "detection" && pp.type != "classification")
    fail(file, "postprocess.type", "expected segmentation, detection or classification, got " + pp.type);
  pp.output_op = get_or<std::string>(post, "output_op", "argmax");
  pp.resize_to_original = get_or<std::string>(post, "resize_to_original", "nearest");
  if (post["inside_graph"]) pp.inside_graph = post["inside_graph"].as<std::vector<std::string>>();
  pp.score_thr = get_or<float>(post, "score_thr", 0.f);
  pp.conf_thr = get_or<float>(post, "conf_thr", 0.f);
  pp.iou_threshold = get_or<float>(post, "iou_threshold", 0.45f);
  if (!post["iou_threshold"] && post["nms"]) pp.iou_threshold = get_or<float>(post["nms"], "iou_threshold", 0.45f);
  pp.max_per_img = get_or<int>(post, "max_per_img", 100);
  pp.nms_pre = get_or<int>(post, "nms_pre", 1000);
  if (const YAML::Node masks = post["masks"]) {
    if (!masks.IsMap()) fail(file, "postprocess.masks", "expected {output: masks, size: [h, w], threshold: 0.5}");
    pp.mask_output = get_or<std::string>(masks, "output", "masks");
    pp.mask_threshold = get<float>(masks, "threshold", file, "postprocess.masks.");
    pp.mask_paste = get_or<std::string>(masks, "paste", "mmdet");
    if (pp.mask_paste != "mmdet" && pp.mask_paste != "torchvision")
      fail(file, "postprocess.masks.paste", "expected mmdet or torchvision, got " + pp.mask_paste);
    if (cfg.output_index(pp.mask_output) < 0)
      fail(file, "postprocess.masks.output", "names '" + pp.mask_output + "', which is not among the outputs");
  }
  return cfg;
}

}  // namespace oars
