# edge_hf — the two contract commands are `make demo` and `make test`; both set everything up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# Exactly these two: they lie on the build machines' disk (any other version downloads gigabytes).
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
EXTRAS := cpu,train,dev
STAMP  := $(VENV)/.installed

.PHONY: help venv mosquitto lint format test demo clean

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

demo: $(STAMP)
	@echo "edge_hf demo: once the daemon lands (issue 4) this will generate a fall clip and a"
	@echo "non-fall clip, run the daemon with the shipped model over them and print its events."
	$(VENV)/bin/edge-hf --version

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
