# Two commands matter: `make demo` and `make test`. Both build .venv with uv first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTHON ?= python3
export SLURMAPI_SHARED_DIR ?= $(abspath ../shared)

.PHONY: demo test test-fast test-slurm lint bench slurm-lab-up slurm-lab-down clean install

$(VENV)/.installed: pyproject.toml
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@test -x $(PY) || uv venv --quiet --python 3.11 $(VENV) 2>/dev/null || uv venv --quiet $(VENV)
	uv pip install --quiet -p $(PY) -e ".[test]"
	@touch $@

install: $(VENV)/.installed

## Run example_dags/example_slurm_submit.py end to end against the local emulator.
demo: install
	$(PY) scripts/demo.py

## The whole suite: lint, unit, emulator, Airflow DAG runs, and real Slurm (brings the lab up).
test: install lint slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY) -m pytest -q -p no:cacheprovider

## Everything but real Slurm.
test-fast: install
	$(PY) -m pytest -q -m "not slurm" -p no:cacheprovider

## Only the real-Slurm suite.
test-slurm: install slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY) -m pytest -q -m slurm -p no:cacheprovider

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

## Benchmarks (bench/README.md): ratios against baselines measured in the same run.
bench: install
	$(PY) bench/run.py

slurm-lab-up:
	scripts/slurm-lab up

slurm-lab-down:
	scripts/slurm-lab down

clean:
	rm -rf .demo build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
