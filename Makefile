# The README's two commands: `make run` (the CartPole example with a simulated fleet) and
# `make test` (the whole suite). Both create .venv and install what they need first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/edge-rl learn --config examples/cartpole_dqn.yaml

test: $(STAMP)
	scripts/ensure-mosquitto
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/backbone.py

clean:
	rm -rf $(VENV) .pytest_cache
