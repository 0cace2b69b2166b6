// oars_infer: run an exported oars model (tools/export.py output: deploy.yaml + model.onnx / model.engine) on
// images and print one JSON object per line to stdout, so scripts and tests can read the results.
//
//   oars_infer --model-dir DIR --image PATH_OR_DIR --out DIR [--backend opencv|onnxruntime|tensorrt]
//
// Video classifiers (deploy.yaml with a sampling section, TSN/TSM exports): --video (= --image) names a video file
// or folder; one JSON line per video with the top-5 labels and scores (frames read with cv::VideoCapture).
//
// Writes OUT/<stem>_vis.png (boxes, instance masks, or colour overlay) and, for segmentation, OUT/<stem>_label.png
// (the raw label map: 8-bit grey, 16-bit when there are more than 256 classes). Mask models' detections carry a
// "segmentation" (uncompressed COCO RLE in original pixels).
#include "backend.h"
#include "deploy_config.h"
#include "postprocess.h"
#include "preprocess.h"
#include "video.h"
#include "visualize.h"

#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Args {
  std::string model_dir, image, out, backend = "opencv";
};

void usage(std::ostream& os) {
  os << "usage: oars_infer --model-dir DIR --image PATH_OR_DIR --out DIR [--backend opencv|onnxruntime|tensorrt]\n";
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "-h" || key == "--help") {
      usage(std::cout);
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::runtime_error("option " + key + " needs a value");
    const std::string value = argv[++i];
    if (key == "--model-dir") a.model_dir = value;
    else if (key == "--image" || key == "--video" || key == "-i") a.image = value;
    else if (key == "--out" || key == "-o") a.out = value;
    else if (key == "--backend") a.backend = value;
    else throw std::runtime_error("unknown option " + key);
  }
  if (a.model_dir.empty() || a.image.empty() || a.out.empty())
    throw std::runtime_error("--model-dir, --image and --out are required");
  return a;
}

std::vector<std::string> list_images(const std::string& path) {
  static const std::vector<std::string> suffixes = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"};
  auto is_image = [](const fs::path& p) {
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    return std::find(suffixes.begin(), suffixes.end(), ext) != suffixes.end();
  };
  if (fs::is_regular_file(path)) return {path};
  if (!fs::is_directory(path)) throw std::runtime_error("input " + path + " is neither an image file nor a folder");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path))
    if (e.is_regular_file() && is_image(e.path())) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error("no images in folder " + path);
  return files;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.7g", v);
  return buf;
}

// A 0/1 CV_8U mask as an uncompressed COCO RLE (the Python predictor's records): runs over the column-major
// pixels, alternating 0s and 1s, starting with 0s.
std::string rle_json(const cv::Mat& mask) {
  std::ostringstream os;
  os << "{\"size\": [" << mask.rows << ", " << mask.cols << "], \"counts\": [";
  unsigned char current = 0;
  long long run = 0;
  bool first = true;
  for (int x = 0; x < mask.cols; ++x)
    for (int y = 0; y < mask.rows; ++y) {
      const unsigned char v = mask.at<unsigned char>(y, x) ? 1 : 0;
      if (v != current) {
        os << (first ? "" : ", ") << run;
        first = false;
        current = v;
        run = 0;
      }
      ++run;
    }
  os << (first ? "" : ", ") << run << "]}";
  return os.str();
}

std::vector<std::string> list_videos(const std::string& path) {
  static const std::vector<std::string> suffixes = {".mp4", ".avi", ".mkv", ".mov", ".webm", ".m4v", ".mpg", ".mpeg"};
  if (fs::is_regular_file(path)) return {path};
  if (!fs::is_directory(path)) throw std::runtime_error("input " + path + " is neither a video file nor a folder");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    if (e.is_regular_file() && std::find(suffixes.begin(), suffixes.end(), ext) != suffixes.end())
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error("no videos in folder " + path);
  return files;
}

// Video classifiers (deploy.yaml with a sampling section): one JSON line per video with the top-5 labels.
int run_videos(const Args& args, const oars::DeployConfig& cfg, oars::Backend& backend) {
  const auto videos = list_videos(args.image);
  double total_ms = 0;
  for (const auto& path : videos) {
    const auto t0 = std::chrono::steady_clock::now();
    const oars::VideoClip clip = oars::load_video_clip(path, cfg);
    const auto outputs = backend.run(clip.blob);
    total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const cv::Mat& scores = outputs.at(0);
    const int num_classes = static_cast<int>(scores.total());
    const float* p = scores.ptr<float>();
    const auto ids = oars::top_k(p, num_classes, 5);
    auto name = [&](int c) { return c < static_cast<int>(cfg.labels.size()) ? cfg.labels[c] : std::to_string(c); };
    std::cout << "{\"video\": " << json_string(path) << ", \"label\": " << ids[0] << ", \"label_name\": "
              << json_string(name(ids[0])) << ", \"score\": " << num(p[ids[0]]) << ", \"topk\": [";
    for (size_t k = 0; k < ids.size(); ++k)
      std::cout << (k ? ", " : "") << "{\"class_id\": " << ids[k] << ", \"label\": " << json_string(name(ids[k]))
                << ", \"score\": " << num(p[ids[k]]) << "}";
    std::cout << "], \"total_frames\": " << clip.total_frames << ", \"frame_inds\": [";
    for (size_t k = 0; k < clip.frame_inds.size(); ++k) std::cout << (k ? ", " : "") << clip.frame_inds[k];
    std::cout << "]}\n";
  }
  std::cerr << "oars_infer: " << videos.size() << " video(s) with " << backend.name() << ", "
            << num(total_ms / videos.size()) << " ms/video (decode + pre + model)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse_args(argc, argv);
    const oars::DeployConfig cfg = oars::load_deploy_config(args.model_dir);
    auto backend = oars::make_backend(args.backend, cfg);
    fs::create_directories(args.out);
    if (cfg.predictor == "clip_classes") return run_videos(args, cfg, *backend);
    const auto images = list_images(args.image);
    double total_ms = 0;
    for (const auto& path : images) {
      const cv::Mat img = cv::imread(path, cv::IMREAD_COLOR);
      if (img.empty()) throw std::runtime_error("cannot read image " + path);
      const auto t0 = std::chrono::steady_clock::now();
      oars::ImageMeta meta;
      const cv::Mat blob = oars::preprocess(img, cfg, meta);
      const auto outputs = backend->run(blob);
      if (outputs.size() != cfg.outputs.size())
        throw std::runtime_error("backend returned " + std::to_string(outputs.size()) + " outputs, deploy.yaml lists " +
                                 std::to_string(cfg.outputs.size()));
      const std::string stem = fs::path(path).stem().string();
      std::ostringstream line;
      if (cfg.predictor == "semantic_labels") {
        const cv::Mat labels = oars::segmentation_labels(outputs, cfg, meta);
        total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        double max_label = 0;
        cv::minMaxLoc(labels, nullptr, &max_label);
        const int num_classes = std::max(static_cast<int>(cfg.labels.size()), static_cast<int>(max_label) + 1);
        std::vector<long long> counts(num_classes, 0);
        for (int y = 0; y < labels.rows; ++y)
          for (int x = 0; x < labels.cols; ++x) {
            const int l = labels.at<int>(y, x);
            if (l >= 0) ++counts[l];
          }
        cv::Mat raw;
        labels.convertTo(raw, num_classes > 256 ? CV_16U : CV_8U);
        const std::string label_png = (fs::path(args.out) / (stem + "_label.png")).string();
        cv::imwrite(label_png, raw);
        cv::imwrite((fs::path(args.out) / (stem + "_vis.png")).string(), oars::draw_segmentation(img, labels, cfg));
        line << "{\"image\": " << json_string(path) << ", \"label_png\": " << json_string(label_png)
             << ", \"shape\": [" << labels.rows << ", " << labels.cols << "], \"counts\": [";
        for (int c = 0; c < num_classes; ++c) line << (c ? ", " : "") << counts[c];
        line << "]}";
        std::cout << line.str() << "\n";
      } else {
        const auto dets = oars::detections(outputs, cfg, meta);
        total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        cv::imwrite((fs::path(args.out) / (stem + "_vis.png")).string(), oars::draw_detections(img, dets, cfg));
        std::cout << "{\"image\": " << json_string(path) << ", \"num_dets\": " << dets.size() << "}\n";
        for (const auto& d : dets) {
          const std::string name =
              d.label >= 0 && d.label < static_cast<int>(cfg.labels.size()) ? cfg.labels[d.label] : "";
          std::cout << "{\"image\": " << json_string(path) << ", \"bbox\": [" << num(d.x1) << ", " << num(d.y1)
                    << ", " << num(d.x2) << ", " << num(d.y2) << "], \"score\": " << num(d.score)
                    << ", \"label\": " << d.label << ", \"label_name\": " << json_string(name);
          if (!d.mask.empty()) std::cout << ", \"segmentation\": " << rle_json(d.mask);
          std::cout << "}\n";
        }
      }
    }
    std::cerr << "oars_infer: " << images.size() << " image(s) with " << backend->name() << ", "
              << num(total_ms / images.size()) << " ms/image (pre + model + post)\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "oars_infer: error: " << e.what() << "\n";
    return 1;
  }
}
