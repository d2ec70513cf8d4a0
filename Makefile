# The README's two commands: `make run` (the CartPole example with a simulated fleet) and
# `make test` (the whole suite but the 10,000-case fuzz runs, what CI runs). Both create
# .venv and install what they need first. The tiers (markers in pyproject.toml):
# `make test-quick`, everything but the tests marked `slow` (real training loops, benchmark
# runs); `make test-bench`, only the benchmark scripts' smoke runs (marked `bench`: CI runs
# them after `make test`, which leaves them out to stay within ten minutes);
# `make test-long`, the real runs past 30 s each (attack scenarios, board groups, CartPole with
# 500 boards (EDGE_RL_LARGE_FLEET=1000 for 1,000); marked `long`: CI runs
# them after `make test`); `make test-deep`, the 10,000-case fuzz runs; `make test-cluster`,
# failover on a three-node nats-server cluster on loopback (marked `cluster`, ~12 min: CI
# runs it after `make test-long`). `make pi-check`: a
# bundle installed and run on an emulated Raspberry Pi (qemu-user, as root; docs/boards.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run lint test test-quick test-bench test-long test-deep test-cluster bench venv clean pi-check

# pip says what it collects and downloads (TensorFlow's wheel alone is ~600 MB): a first
# install takes minutes, and a silent one looks like a hang.
$(STAMP): pyproject.toml
	@echo "edge-rl: installing into $(VENV) (first use only; a few minutes, mostly TensorFlow)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --progress-bar on -e ".[dev]"
	touch $(STAMP)
	@echo "edge-rl: installed"

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/edge-rl learn --config examples/cartpole_dqn.yaml

# The formatter lays out the code and ruff checks it (complexity included) before any test.
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

# Two workers, one per core (pytest-xdist); the checks that read the session's shared run
# stay on one worker. The benchmark scripts' smoke runs are `make test-bench` (CI runs both).
test: lint
	scripts/ensure-mosquitto
	$(BIN)/python -m pytest -m "not deep and not bench and not long and not cluster" -n 2 --dist loadgroup

test-quick: $(STAMP)
	scripts/ensure-mosquitto
	$(BIN)/python -m pytest -m "not slow"

test-bench: $(STAMP)
	scripts/ensure-mosquitto
	$(BIN)/python -m pytest -m bench

test-long: $(STAMP)
	scripts/ensure-mosquitto
	$(BIN)/python -m pytest -m long

test-cluster: $(STAMP)
	scripts/ensure-mosquitto
	scripts/ensure-nats
	$(BIN)/python -m pytest -m cluster

test-deep: $(STAMP)
	$(BIN)/python -m pytest -m deep tests/fuzz

# The emulated Raspberry Pi check (docs/boards.md): root, qemu-user, a cached arm64 rootfs.
pi-check: $(STAMP)
	scripts/emulated-pi-check

bench: $(STAMP)
	$(BIN)/python benchmarks/backbone.py

clean:
	rm -rf $(VENV) .pytest_cache
