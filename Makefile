# edge_hf — the two contract commands are `make demo` and `make test`; both set everything up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# Exactly these two: they lie on the build machines' disk (any other version downloads gigabytes).
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
EXTRAS := cpu,train,dev
STAMP  := $(VENV)/.installed

.PHONY: help venv mosquitto lint format test demo demo-model clean

help:
	@echo "make demo   set up and run the daemon on the bundled demo clips"
	@echo "make test   set up, lint, and run the test suite"
	@echo "make lint   ruff (lint + format check) and mypy"

# Re-runs only when pyproject.toml changes, so a second `make test` starts at once.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH_PINS)
	$(PIP) install -q -e '.[$(EXTRAS)]'
	@touch $@

venv: $(STAMP)

# Tests talk to a real Mosquitto on 127.0.0.1 (their fixtures start it on a free port).
mosquitto:
	@if command -v mosquitto >/dev/null 2>&1 || test -x /usr/sbin/mosquitto; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing mosquitto (Debian packages mosquitto, mosquitto-clients)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto mosquitto-clients >/dev/null; \
	else \
		echo "mosquitto is missing: run 'sudo apt-get install -y mosquitto mosquitto-clients' and retry" >&2; exit 1; \
	fi

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test: $(STAMP) mosquitto lint
	$(VENV)/bin/pytest

# Two generated scenes (a fall, and a slow lie-down ending in the same pose) played as two
# real-time cameras through the daemon with the shipped model; events print as they happen.
demo: $(STAMP)
	$(VENV)/bin/edge-hf synth --demo --out demo
	$(VENV)/bin/edge-hf check --config deploy/demo.yaml
	$(VENV)/bin/edge-hf run --config deploy/demo.yaml --statuses

# The shipped synthetic demo model: data, diagnose (trains T=3, T=1 and the time-shuffled control
# on the same budget), export, held-out evaluation at another fps, model card. About an hour on
# 2 CPU cores. Every step is deterministic for its seed.
DEMO_MODEL := models/fall-synth-mobilenet_v3_small-t3
DEMO_TRAIN := --backbone mobilenet_v3_small --input-size 96 --epochs 50 --samples-per-clip 2 --lr 2e-3
demo-model: $(STAMP)
	$(VENV)/bin/edge-hf synth --out data/synth_train --clips 200 --fps 30 --seed 21 --width 240 --height 180
	$(VENV)/bin/edge-hf synth --out data/synth_test10 --clips 30 --fps 10 --seed 99 --width 240 --height 180
	$(VENV)/bin/edge-hf diagnose --data data/synth_train --test-data data/synth_test10 --out runs/demo $(DEMO_TRAIN)
	$(VENV)/bin/edge-hf export --checkpoint runs/demo/hyperframe/best.pt --out $(DEMO_MODEL).onnx
	$(VENV)/bin/edge-hf eval --model $(DEMO_MODEL).onnx --data data/synth_test10 --json > runs/demo/test10.json
	$(PY) -m edge_hf.card --model $(DEMO_MODEL).onnx --out $(DEMO_MODEL).md \
		--train-command "make demo-model  # edge-hf diagnose --data data/synth_train --test-data data/synth_test10 --out runs/demo $(DEMO_TRAIN)" \
		--data-note "1200 synthetic clips (200 per class) at 30 fps, 240x180, \`edge-hf synth --clips 200 --fps 30 --seed 21\`; 20% held out for validation (best epoch by fall F1)." \
		--test-json runs/demo/test10.json \
		--test-note "180 synthetic clips (30 per class) generated at **10 fps** with another seed (\`edge-hf synth --clips 30 --fps 10 --seed 99\`), never seen in training; clip score = logits averaged over the windows at 1/4, 1/2, 3/4 of the action." \
		--diagnose-md runs/demo/diagnose.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
