# make demo: set up .venv, generate the demo data, train a small U-Net on the CPU, evaluate it, draw pictures.
# make test: set up .venv and run the test suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DEMO_CFG := configs/segmentation/unet/unet_demo_shapes.yaml
DEMO_DIR := work_dirs/demo

.PHONY: demo test lint setup clean-demo

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[deploy,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m oars.data.demo_shapes --out data/demo_shapes
	$(PY) tools/train.py -c $(DEMO_CFG) --work-dir $(DEMO_DIR)
	$(PY) tools/eval.py -c $(DEMO_CFG) -w "$$(cat $(DEMO_DIR)/last_checkpoint)" --work-dir $(DEMO_DIR) \
		--show-dir $(DEMO_DIR)/pictures
	$(PY) tools/infer.py -c $(DEMO_CFG) -w "$$(cat $(DEMO_DIR)/last_checkpoint)" \
		-i data/demo_shapes/images/val -o $(DEMO_DIR)/infer
	@echo "demo done: metrics in $(DEMO_DIR)/metrics.json, pictures in $(DEMO_DIR)/pictures (summary.png) and $(DEMO_DIR)/infer"

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean-demo:
	rm -rf $(DEMO_DIR)
