# make demo: set up .venv, generate the demo data, train a small U-Net, a small YOLOv3 and a small Mask R-CNN on the
# CPU, evaluate them, draw pictures, export (demo-seg / demo-det run one task; demo-yolo / demo-mask one detector).
# make test: set up .venv and run the test suite.
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

.PHONY: demo demo-seg demo-det demo-yolo demo-mask demo-video demo-video-data demo-data test bench cpp lint setup clean-demo

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[deploy,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: demo-seg demo-det demo-video
	@echo "demo done: segmentation in $(DEMO_DIR), detection in $(DET_DIR) (YOLOv3) and $(MASK_DIR) (Mask R-CNN) \
	(metrics.json, pictures/, infer/, export/ (model.onnx + deploy.yaml), deploy_infer/, report.html; YOLOv3 also \
	export_int8/, deploy_infer_int8/), video in $(VID_DIR) (TSM)"

demo-data: $(STAMP)
	$(PY) -m oars.data.demo_shapes --out data/demo_shapes

demo-seg: demo-data
	$(PY) tools/train.py -c $(DEMO_CFG) --work-dir $(DEMO_DIR) --overwrite
	$(PY) tools/eval.py -c $(DEMO_CFG) -w "$$(cat $(DEMO_DIR)/last_checkpoint)" --work-dir $(DEMO_DIR) \
		--show-dir $(DEMO_DIR)/pictures --report
	$(PY) tools/infer.py -c $(DEMO_CFG) -w "$$(cat $(DEMO_DIR)/last_checkpoint)" \
		-i data/demo_shapes/images/val -o $(DEMO_DIR)/infer
	$(PY) tools/export.py -c $(DEMO_CFG) -w "$$(cat $(DEMO_DIR)/last_checkpoint)" -o $(DEMO_DIR)/export --dynamic
	$(PY) deploy/python/infer.py --model-dir $(DEMO_DIR)/export -i data/demo_shapes/images/val \
		-o $(DEMO_DIR)/deploy_infer --benchmark

demo-det: demo-yolo demo-mask

demo-video-data: $(STAMP)
	$(PY) -m oars.data.demo_videos --out data/demo_videos

demo-video: demo-video-data
	$(PY) tools/train.py -c $(VID_CFG) --work-dir $(VID_DIR) --overwrite
	$(PY) tools/eval.py -c $(VID_CFG) -w "$$(cat $(VID_DIR)/last_checkpoint)" --work-dir $(VID_DIR) \
		--show-dir $(VID_DIR)/pictures --report
	$(PY) tools/infer.py -c $(VID_CFG) -w "$$(cat $(VID_DIR)/last_checkpoint)" \
		-i data/demo_videos/videos/val -o $(VID_DIR)/infer
	$(PY) tools/export.py -c $(VID_CFG) -w "$$(cat $(VID_DIR)/last_checkpoint)" -o $(VID_DIR)/export --dynamic
	$(PY) deploy/python/infer.py --model-dir $(VID_DIR)/export -i data/demo_videos/videos/val \
		-o $(VID_DIR)/deploy_infer

demo-yolo: demo-data
	$(PY) tools/train.py -c $(DET_CFG) --work-dir $(DET_DIR) --overwrite
	$(PY) tools/eval.py -c $(DET_CFG) -w "$$(cat $(DET_DIR)/last_checkpoint)" --work-dir $(DET_DIR) \
		--show-dir $(DET_DIR)/pictures --report
	$(PY) tools/infer.py -c $(DET_CFG) -w "$$(cat $(DET_DIR)/last_checkpoint)" \
		-i data/demo_shapes/images/val -o $(DET_DIR)/infer
	$(PY) tools/export.py -c $(DET_CFG) -w "$$(cat $(DET_DIR)/last_checkpoint)" -o $(DET_DIR)/export --dynamic
	$(PY) deploy/python/infer.py --model-dir $(DET_DIR)/export -i data/demo_shapes/images/val \
		-o $(DET_DIR)/deploy_infer --benchmark
	$(PY) tools/export.py -c $(DET_CFG) -w "$$(cat $(DET_DIR)/last_checkpoint)" -o $(DET_DIR)/export_int8 --dynamic \
		--int8 --calib-dir data/demo_shapes/images/train --calib-num 64
	$(PY) deploy/python/infer.py --model-dir $(DET_DIR)/export_int8 -i data/demo_shapes/images/val \
		-o $(DET_DIR)/deploy_infer_int8 --benchmark

demo-mask: demo-data
	$(PY) tools/train.py -c $(MASK_CFG) --work-dir $(MASK_DIR) --overwrite
	$(PY) tools/eval.py -c $(MASK_CFG) -w "$$(cat $(MASK_DIR)/last_checkpoint)" --work-dir $(MASK_DIR) \
		--show-dir $(MASK_DIR)/pictures --report
	$(PY) tools/infer.py -c $(MASK_CFG) -w "$$(cat $(MASK_DIR)/last_checkpoint)" \
		-i data/demo_shapes/images/val -o $(MASK_DIR)/infer
	$(PY) tools/export.py -c $(MASK_CFG) -w "$$(cat $(MASK_DIR)/last_checkpoint)" -o $(MASK_DIR)/export --dynamic
	$(PY) deploy/python/infer.py --model-dir $(MASK_DIR)/export -i data/demo_shapes/images/val \
		-o $(MASK_DIR)/deploy_infer --benchmark

test: $(STAMP)
	# two xdist workers with one thread each use the 2 cores better than one process with two threads (much of the
	# suite is Python-bound: exports, tool subprocesses); --dist loadfile keeps each file's fixtures in one worker.
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
	rm -rf $(DEMO_DIR) $(DET_DIR) $(MASK_DIR) $(VID_DIR)
