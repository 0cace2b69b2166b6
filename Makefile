# make demo: set up .venv, generate the demo data, train a small U-Net, YOLOv3, Mask R-CNN, TSM (video) and pix2pix
# on the CPU, evaluate them, draw pictures, export (demo-seg / demo-det / demo-video / demo-gan run one task;
# demo-yolo / demo-mask / demo-pix2pix / demo-cgan one model; demo-int8 the YOLOv3 INT8 export; demo-onestage the
# FCOS one-stage detector, outside make demo's 20 minutes; demo-localization BMN on generated long videos, from
# demo-video's recognizer features; demo-cacascade class-aware sampling on a long-tailed set; demo-parsing ACE2P human
# parsing with flip TTA; demo-edge the demo U-Net and YOLOv3 in every export format with the parity table; all
# outside make demo).
# make demo runs its demos in two lanes side by side, one thread each: these small models use a second core for
# about 1.3x speed, a second process for nearly 2x. Each lane's lines are prefixed with its name.
# make test: set up .venv and run the test suite (make test-slow: the slow-marked tests; make test-all: both).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DEMO_CFG := configs/segmentation/unet/unet_demo_shapes.yaml
DEMO_DIR := work_dirs/demo
DET_CFG := configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml
DET_DIR := work_dirs/demo_det
MASK_CFG := configs/detection/mask_rcnn/mask_rcnn_r18_fpn_demo_shapes.yaml
MASK_DIR := work_dirs/demo_mask
VID_CFG := configs/video/tsm/tsm_r18_demo_videos.yaml
VID_DIR := work_dirs/demo_video
PIX_CFG := configs/gan/pix2pix/pix2pix_demo_shapes.yaml
PIX_DIR := work_dirs/demo_pix2pix
PIX_DATA := data/demo_pix2pix
FCOS_CFG := configs/detection/fcos/fcos_r18_fpn_demo_shapes.yaml
FCOS_DIR := work_dirs/demo_fcos
CGAN_CFG := configs/gan/cgan/cgan_demo_digits.yaml
CGAN_DIR := work_dirs/demo_cgan
LOC_CFG := configs/video/bmn/bmn_demo_long_videos.yaml
LOC_DIR := work_dirs/demo_localization
LOC_DATA := data/demo_long_videos

.PHONY: demo demo-lane-1 demo-lane-2 demo-seg demo-det demo-yolo demo-mask demo-int8 demo-onestage demo-video demo-video-data demo-localization demo-cacascade demo-parsing \
	demo-gan demo-pix2pix demo-pix2pix-data demo-cgan demo-gan-data demo-data demo-edge test test-slow test-all bench cpp \
	lint setup \
	clean-demo studio

setup: $(STAMP)

# the local web app over ./studio_workspace (http://127.0.0.1:8765; docs/studio.md): the demo data sets may be read
studio: $(STAMP) demo-data
	$(VENV)/bin/oars-studio --workspace studio_workspace --data-root data

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[deploy,dev,serve,compress,track,tune,edge,data,studio]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: demo-data demo-video-data
	$(MAKE) --no-print-directory -j2 demo-lane-1 demo-lane-2
	@echo "demo done: segmentation in $(DEMO_DIR), detection in $(DET_DIR) (YOLOv3) and $(MASK_DIR) (Mask R-CNN) \
	(metrics.json, pictures/, infer/, export/ (model.onnx + deploy.yaml), deploy_infer/, report.html), video in \
	$(VID_DIR) (TSM), pix2pix in $(PIX_DIR) (also samples/: grids during training); make demo-cgan adds the CGAN"

# one thread per lane; pipefail keeps a failing step failing the lane through the prefixing sed. The lanes are
# balanced by measured time on 2 cores (fresh clone): U-Net 6.2 + Mask R-CNN 9.8 min | YOLOv3 8.5 + TSM 5.0 +
# pix2pix 2.7 min
demo-lane-1:
	set -o pipefail; export OMP_NUM_THREADS=1; \
		{ $(MAKE) --no-print-directory demo-seg && $(MAKE) --no-print-directory demo-mask; } 2>&1 \
		| sed -u 's/^/[seg, mask] /'

demo-lane-2:
	set -o pipefail; export OMP_NUM_THREADS=1; \
		{ $(MAKE) --no-print-directory demo-yolo && $(MAKE) --no-print-directory demo-video \
		&& $(MAKE) --no-print-directory demo-pix2pix; } 2>&1 \
		| sed -u 's/^/[yolo, video, pix2pix] /'

demo-data: $(STAMP)
	$(PY) -m oars.data.demo_shapes --out data/demo_shapes

demo-seg: demo-data
	$(PY) tools/train.py -c $(DEMO_CFG) --work-dir $(DEMO_DIR) --overwrite
	$(PY) tools/eval.py -c $(DEMO_CFG) -w "$$(cat $(DEMO_DIR)/last_checkpoint)" --work-dir $(DEMO_DIR) \
		--show-dir $(DEMO_DIR)/pictures --report
	$(PY) tools/infer.py -c $(DEMO_CFG) -w "$$(cat $(DEMO_DIR)/last_checkpoint)" \
		-i data/demo_shapes/images/val -o $(DEMO_DIR)/infer
	$(PY) tools/export.py -c $(DEMO_CFG) -w "$$(cat $(DEMO_DIR)/last_checkpoint)" -o $(DEMO_DIR)/export --dynamic --overwrite
	$(PY) deploy/python/infer.py --model-dir $(DEMO_DIR)/export -i data/demo_shapes/images/val \
		-o $(DEMO_DIR)/deploy_infer --benchmark

demo-det: demo-yolo demo-mask

demo-video-data: $(STAMP)
	$(PY) -m video.demo_data --out data/demo_videos

demo-video: demo-video-data
	$(PY) tools/train.py -c $(VID_CFG) --work-dir $(VID_DIR) --overwrite
	$(PY) tools/eval.py -c $(VID_CFG) -w "$$(cat $(VID_DIR)/last_checkpoint)" --work-dir $(VID_DIR) \
		--show-dir $(VID_DIR)/pictures --report
	$(PY) tools/infer.py -c $(VID_CFG) -w "$$(cat $(VID_DIR)/last_checkpoint)" \
		-i data/demo_videos/videos/val -o $(VID_DIR)/infer
	$(PY) tools/export.py -c $(VID_CFG) -w "$$(cat $(VID_DIR)/last_checkpoint)" -o $(VID_DIR)/export --dynamic --overwrite
	$(PY) deploy/python/infer.py --model-dir $(VID_DIR)/export -i data/demo_videos/videos/val \
		-o $(VID_DIR)/deploy_infer

demo-yolo: demo-data
	$(PY) tools/train.py -c $(DET_CFG) --work-dir $(DET_DIR) --overwrite
	$(PY) tools/eval.py -c $(DET_CFG) -w "$$(cat $(DET_DIR)/last_checkpoint)" --work-dir $(DET_DIR) \
		--show-dir $(DET_DIR)/pictures --report
	$(PY) tools/infer.py -c $(DET_CFG) -w "$$(cat $(DET_DIR)/last_checkpoint)" \
		-i data/demo_shapes/images/val -o $(DET_DIR)/infer
	$(PY) tools/export.py -c $(DET_CFG) -w "$$(cat $(DET_DIR)/last_checkpoint)" -o $(DET_DIR)/export --dynamic --overwrite
	$(PY) deploy/python/infer.py --model-dir $(DET_DIR)/export -i data/demo_shapes/images/val \
		-o $(DET_DIR)/deploy_infer --benchmark

# CACascade R-CNN's class-aware sampling on a long-tailed demo set (triangles 10x rarer in training): the demo cascade
# trained with the default sampler and with ClassAwareSampler (same seed), per-class AP of both (about 20 minutes on
# one thread; not part of make demo)
demo-cacascade: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) benchmarks/class_aware_sampling.py --work-dir work_dirs/demo_cacascade \
		--data data/demo_shapes_longtail

# ACE2P human parsing on generated stick figures (left/right told only by the pose): no TTA, flip TTA without the
# left/right label swap, flip TTA with it; not part of make demo
PARSE_CFG := configs/segmentation/ace2p/ace2p_r18_demo_figures.yaml
PARSE_DIR := work_dirs/demo_parsing
demo-parsing: $(STAMP)
	$(PY) tools/demo_data.py figures --out data/demo_figures
	$(PY) tools/train.py -c $(PARSE_CFG) --work-dir $(PARSE_DIR) --overwrite
	$(PY) tools/eval.py -c $(PARSE_CFG) -w "$$(cat $(PARSE_DIR)/last_checkpoint)" --work-dir $(PARSE_DIR)/eval_plain \
		--show-dir $(PARSE_DIR)/pictures --report
	$(PY) tools/eval.py -c $(PARSE_CFG) -w "$$(cat $(PARSE_DIR)/last_checkpoint)" --work-dir $(PARSE_DIR)/eval_flip \
		-o "model.test_cfg.aug={flip: true}"
	$(PY) tools/eval.py -c $(PARSE_CFG) -w "$$(cat $(PARSE_DIR)/last_checkpoint)" --work-dir $(PARSE_DIR)/eval_flip_swap \
		-o "model.test_cfg.aug={flip: true, flip_label_pairs: [[3, 4], [5, 6]]}"
	$(PY) tools/export.py -c $(PARSE_CFG) -w "$$(cat $(PARSE_DIR)/last_checkpoint)" -o $(PARSE_DIR)/export --dynamic \
		--overwrite
	$(PY) deploy/python/infer.py --model-dir $(PARSE_DIR)/export -i data/demo_figures/val_images \
		-o $(PARSE_DIR)/deploy_infer --benchmark
	@for d in eval_plain eval_flip eval_flip_swap; do printf '%s: ' $$d; $(PY) -c "import json,sys; \
		m=json.load(open(sys.argv[1]))['metrics']; print(*(f'{k} {m[k]:.3f}' for k in ('aAcc','mIoU','mAcc')))" \
		$(PARSE_DIR)/$$d/metrics.json; done

# temporal action localisation: long generated videos -> the demo recognizer's snippet features (trained by
# demo-video's first step when work_dirs/demo_video has no checkpoint; features re-extracted when it is newer) ->
# BMN -> timelines (pictures/) and report.html with AR@100 / AUC / mAP@0.5 against a random-segment baseline
demo-localization: $(STAMP)
	$(PY) tools/demo_data.py long-videos --out $(LOC_DATA)
	test -f $(VID_DIR)/last_checkpoint || { $(MAKE) --no-print-directory demo-video-data \
		&& $(PY) tools/train.py -c $(VID_CFG) --work-dir $(VID_DIR) --overwrite; }
	if [ "$$(cat $(VID_DIR)/last_checkpoint)" -nt $(LOC_DATA)/features/videos.json ]; then \
		rm -rf $(LOC_DATA)/features; fi
	$(PY) tools/extract_features.py -c $(VID_CFG) -w "$$(cat $(VID_DIR)/last_checkpoint)" -i $(LOC_DATA)/videos \
		-o $(LOC_DATA)/features
	$(PY) tools/train.py -c $(LOC_CFG) --work-dir $(LOC_DIR) --overwrite
	$(PY) tools/eval.py -c $(LOC_CFG) -w "$$(cat $(LOC_DIR)/last_checkpoint)" --work-dir $(LOC_DIR) \
		--show-dir $(LOC_DIR)/pictures --report
	$(PY) tools/export.py -c $(LOC_CFG) -w "$$(cat $(LOC_DIR)/last_checkpoint)" --recognizer-config $(VID_CFG) \
		--recognizer-weights "$$(cat $(VID_DIR)/last_checkpoint)" -o $(LOC_DIR)/export --overwrite
	$(PY) deploy/python/infer.py --model-dir $(LOC_DIR)/export -i $(LOC_DATA)/videos -o $(LOC_DIR)/deploy_infer
	@echo "demo-localization done: $(LOC_DIR) (pictures/, report.html, metrics.json, export/ (model.onnx + \
	recognizer.onnx + deploy.yaml), deploy_infer/ (results.jsonl, <video>_timeline.png)); model vs random baseline:"
	@cat $(LOC_DIR)/localization_vs_baseline.json

# the one-stage demo: FCOS (anchor-free) on the demo shapes (~4 min training on one thread), not part of make demo
demo-onestage: demo-data
	$(PY) tools/train.py -c $(FCOS_CFG) --work-dir $(FCOS_DIR) --overwrite
	$(PY) tools/eval.py -c $(FCOS_CFG) -w "$$(cat $(FCOS_DIR)/last_checkpoint)" --work-dir $(FCOS_DIR) \
		--show-dir $(FCOS_DIR)/pictures --report
	$(PY) tools/infer.py -c $(FCOS_CFG) -w "$$(cat $(FCOS_DIR)/last_checkpoint)" \
		-i data/demo_shapes/images/val -o $(FCOS_DIR)/infer
	$(PY) tools/export.py -c $(FCOS_CFG) -w "$$(cat $(FCOS_DIR)/last_checkpoint)" -o $(FCOS_DIR)/export --dynamic --overwrite
	$(PY) deploy/python/infer.py --model-dir $(FCOS_DIR)/export -i data/demo_shapes/images/val \
		-o $(FCOS_DIR)/deploy_infer --benchmark

# the YOLOv3 demo's INT8 graph (calibrated on 64 training images; its agreement with FP32 printed), after demo-yolo
demo-int8:
	test -f $(DET_DIR)/last_checkpoint || $(MAKE) --no-print-directory demo-yolo
	$(PY) tools/export.py -c $(DET_CFG) -w "$$(cat $(DET_DIR)/last_checkpoint)" -o $(DET_DIR)/export_int8 --dynamic --overwrite \
		--int8 --calib-dir data/demo_shapes/images/train --calib-num 64
	$(PY) deploy/python/infer.py --model-dir $(DET_DIR)/export_int8 -i data/demo_shapes/images/val \
		-o $(DET_DIR)/deploy_infer_int8 --benchmark

# the demo U-Net and YOLOv3 (their last checkpoints; trained first when absent) exported to onnx and every edge
# format (tools/export.py --format openvino, ort, ...), each checked against ONNX Runtime, and the model x format
# table printed (tools/format_matrix.py, the code of tests/export/test_format_matrix.py); exports in work_dirs/demo_edge
demo-edge:
	test -f $(DEMO_DIR)/last_checkpoint || $(MAKE) --no-print-directory demo-seg
	test -f $(DET_DIR)/last_checkpoint || $(MAKE) --no-print-directory demo-yolo
	$(PY) tools/format_matrix.py -o work_dirs/demo_edge \
		-m U-Net $(DEMO_CFG) "$$(cat $(DEMO_DIR)/last_checkpoint)" \
		-m YOLOv3 $(DET_CFG) "$$(cat $(DET_DIR)/last_checkpoint)"

demo-gan: demo-pix2pix demo-cgan

demo-gan-data: $(STAMP)
	$(PY) -m gan.demo_data --out data/demo_gan

# pix2pix learns label map -> photo on pairs rendered from the demo shapes' label maps by a fixed rule (class colour,
# shading, outlines, shadows: python -m gan.demo_pairs); the shapes' own images have random colours, not learnable
demo-pix2pix-data: demo-data
	$(PY) -m gan.demo_pairs --shapes data/demo_shapes --out $(PIX_DATA)

demo-pix2pix: demo-pix2pix-data
	$(PY) tools/train.py -c $(PIX_CFG) --work-dir $(PIX_DIR) --overwrite
	$(PY) tools/eval.py -c $(PIX_CFG) -w "$$(cat $(PIX_DIR)/last_checkpoint)" --work-dir $(PIX_DIR) \
		--show-dir $(PIX_DIR)/pictures --report
	$(PY) tools/infer.py -c $(PIX_CFG) -w "$$(cat $(PIX_DIR)/last_checkpoint)" \
		-i $(PIX_DATA)/labels/val -o $(PIX_DIR)/infer
	$(PY) tools/export.py -c $(PIX_CFG) -w "$$(cat $(PIX_DIR)/last_checkpoint)" -o $(PIX_DIR)/export --dynamic --overwrite
	$(PY) deploy/python/infer.py --model-dir $(PIX_DIR)/export -i $(PIX_DATA)/labels/val \
		-o $(PIX_DIR)/deploy_infer

demo-cgan: demo-gan-data
	$(PY) tools/train.py -c $(CGAN_CFG) --work-dir $(CGAN_DIR) --overwrite
	$(PY) tools/eval.py -c $(CGAN_CFG) -w "$$(cat $(CGAN_DIR)/last_checkpoint)" --work-dir $(CGAN_DIR) \
		--show-dir $(CGAN_DIR)/pictures --report
	$(PY) tools/infer.py -c $(CGAN_CFG) -w "$$(cat $(CGAN_DIR)/last_checkpoint)" --seed 0 --num 30 \
		-o $(CGAN_DIR)/infer
	$(PY) tools/export.py -c $(CGAN_CFG) -w "$$(cat $(CGAN_DIR)/last_checkpoint)" -o $(CGAN_DIR)/export --dynamic --overwrite
	$(PY) deploy/python/infer.py --model-dir $(CGAN_DIR)/export --seed 0 --num 30 -o $(CGAN_DIR)/deploy_infer

demo-mask: demo-data
	$(PY) tools/train.py -c $(MASK_CFG) --work-dir $(MASK_DIR) --overwrite
	$(PY) tools/eval.py -c $(MASK_CFG) -w "$$(cat $(MASK_DIR)/last_checkpoint)" --work-dir $(MASK_DIR) \
		--show-dir $(MASK_DIR)/pictures --report
	$(PY) tools/infer.py -c $(MASK_CFG) -w "$$(cat $(MASK_DIR)/last_checkpoint)" \
		-i data/demo_shapes/images/val -o $(MASK_DIR)/infer
	$(PY) tools/export.py -c $(MASK_CFG) -w "$$(cat $(MASK_DIR)/last_checkpoint)" -o $(MASK_DIR)/export --dynamic --overwrite
	$(PY) deploy/python/infer.py --model-dir $(MASK_DIR)/export -i data/demo_shapes/images/val \
		-o $(MASK_DIR)/deploy_infer --benchmark

# two xdist workers with one thread each use the 2 cores better than one process with two threads (much of the
# suite is Python-bound: exports, tool subprocesses); --dist loadfile keeps each file's fixtures in one worker.
# make test skips the tests marked slow (the long end-to-end and export-parity runs: about a third of the time);
# make test-slow runs only those, make test-all everything. CI (.ci/run) runs make test, then make test-slow.
test: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadfile --durations=25 -m "not slow"

test-slow: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadfile --durations=25 -m slow

test-all: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadfile --durations=25

bench: $(STAMP)
	$(PY) benchmarks/train_step.py
	$(PY) benchmarks/data_pipeline.py
	$(PY) benchmarks/infer_latency.py

cpp:
	deploy/cpp/build.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean-demo:
	rm -rf $(DEMO_DIR) $(DET_DIR) $(MASK_DIR) $(VID_DIR) $(PIX_DIR) $(CGAN_DIR) $(FCOS_DIR)
