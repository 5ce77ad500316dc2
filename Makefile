# Two commands matter: `make demo` and `make test`. Both build .venv with uv first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTHON ?= python3

# The tests without real Slurm mostly wait on jobs and sockets: three at once on two cores, a module
# per worker (each worker has its own Airflow home and database). Real Slurm runs alone: its lab has 2 CPUs.
XDIST  ?= -n 3 --dist loadfile

# Coverage of airflow_provider_slurmapi (lines and branches) in the runs without real Slurm, set up
# in [tool.coverage.*] of pyproject.toml. Measured 94.7%; the floor is that rounded down a few points
# (paths reached only when timing allows vary a little): raise it as the figure rises. `COV=` turns it off.
COV_FLOOR ?= 90
COV    ?= --cov=airflow_provider_slurmapi --cov-report=term --cov-fail-under=$(COV_FLOOR)

VENV2  ?= .venv-airflow2
PY2    := $(VENV2)/bin/python

# The newest Airflow 3 before 3.3 (triggers are not given on_kill): the safe_to_cancel path.
VENV3X ?= .venv-airflow3x
PY3X   := $(VENV3X)/bin/python
AIRFLOW_3X ?= 3.2.2
# Without Airflow's constraints file, pip takes cadwyn 9, which refuses the pydantic the rest resolves
# to (the api-server and dag-processor then die at import): the set that 3.3.2 runs on works for 3.2.
AIRFLOW_3X_PINS ?= "cadwyn==7.0.0" "fastapi==0.136.3" "pydantic==2.14.4"

# The lock files pin every package of the test venvs (resolved for CI: Linux x86_64, Python 3.11), so
# two installs on two days get the same versions; the install targets use them as constraints.
# `make lock` rewrites them after a change of pyproject.toml or of the Airflow pins above, keeping every
# other pin it can; `make lock LOCK_FLAGS=--upgrade` moves everything to the newest versions.
LOCK     := requirements/test-lock.txt
LOCK2    := requirements/test-lock-airflow2.txt
LOCK3X   := requirements/test-lock-airflow3x.txt
AIRFLOW_2 ?= "apache-airflow==2.11.*" apache-airflow-providers-google
COMPILE  := uv pip compile --quiet --python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
	--custom-compile-command "make lock" --no-emit-package slurmapi-emulator --extra test $(LOCK_FLAGS) pyproject.toml

.PHONY: demo test test-fast test-slurm test-slurm-26 test-airflow2 test-deployment test-deployment-airflow2 test-deployment-airflow3x deployment-deps lint bench slurm-lab-up slurm-lab-down clean install lock

$(VENV)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK)
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@test -x $(PY) || uv venv --quiet --python 3.11 $(VENV) 2>/dev/null || uv venv --quiet $(VENV)
	uv pip install --quiet -p $(PY) -c $(LOCK) -e ".[test]"
	@touch $@

install: $(VENV)/.installed

## Rewrite the lock files of the three test venvs (see LOCK above); commit them with the change.
lock:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	$(COMPILE) -o $(LOCK)
	printf '%s\n' $(AIRFLOW_2) | $(COMPILE) - -o $(LOCK2)
	printf '%s\n' "apache-airflow==$(AIRFLOW_3X)" apache-airflow-providers-google $(AIRFLOW_3X_PINS) | $(COMPILE) - -o $(LOCK3X)

# Airflow 2.11 beside the main (3.x) venv, for the compatibility run.
$(VENV2)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK2)
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@test -x $(PY2) || uv venv --quiet --python 3.11 $(VENV2) 2>/dev/null || uv venv --quiet $(VENV2)
	uv pip install --quiet -p $(PY2) -c $(LOCK2) $(AIRFLOW_2) -e ".[test]"
	@touch $@

$(VENV3X)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK3X)
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@test -x $(PY3X) || uv venv --quiet --python 3.11 $(VENV3X) 2>/dev/null || uv venv --quiet $(VENV3X)
	uv pip install --quiet -p $(PY3X) -c $(LOCK3X) "apache-airflow==$(AIRFLOW_3X)" apache-airflow-providers-google $(AIRFLOW_3X_PINS) -e ".[test]"
	@touch $@

## Run example_dags/example_slurm_submit.py end to end against the local emulator.
demo: install
	$(PY) scripts/demo.py

## The whole suite: lint, unit, emulator, Airflow DAG runs, real Slurm (brings the lab up), then a real
## Airflow deployment on 3.3, on the newest 3.x before 3.3 and on 2.11, and the DAG tests on 2.11.
## The 2.11 DAG tests (CPU, the emulator) run beside the 3.x deployment (mostly waiting on Slurm
## jobs): CI stays within its time. Deployments never run beside each other: the lab has 2 CPUs.
test: install lint slurm-lab-up
	$(PY) -m pytest -q -p no:cacheprovider $(XDIST) $(COV) -m "not slurm and not deployment"
	@eval "$$(scripts/slurm-lab env)" && $(PY) -m pytest -q -p no:cacheprovider -m "slurm and not deployment"
	$(MAKE) test-slurm-26
	$(MAKE) test-deployment
	$(MAKE) -j2 --output-sync=target test-deployment-airflow3x test-airflow2
	$(MAKE) test-deployment-airflow2

## A real deployment (PostgreSQL; api-server, scheduler, dag-processor, triggerer as processes) on the
## real Slurm lab, driven through the REST API; prints the FIGURE lines it measures.
test-deployment: install deployment-deps slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY) -m pytest -q -p no:cacheprovider -m deployment tests/deployment

## The same deployment suite on Airflow 2.11 and on the newest 3.x before 3.3 (own venvs).
test-deployment-airflow2: $(VENV2)/.installed deployment-deps slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY2) -m pytest -q -p no:cacheprovider -m deployment tests/deployment

test-deployment-airflow3x: $(VENV3X)/.installed deployment-deps slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY3X) -m pytest -q -p no:cacheprovider -m deployment tests/deployment

## PostgreSQL from Debian's packages, for the deployment suite (as root; the system service is not started).
deployment-deps:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		test "$$(id -u)" = 0 || { echo "PostgreSQL missing: run 'make deployment-deps' as root" >&2; exit 1; }; \
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
		status=$$?; rm -f /usr/sbin/policy-rc.d; exit $$status; }

## The hook, DAG and fault tests again on Airflow 2.11 (the 3.x-only trigger-runner tests excluded).
test-airflow2: $(VENV2)/.installed
	$(PY2) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile -m "not slurm" tests/unit tests/emulator tests/dag_runs \
		--ignore=tests/unit/triggers --ignore=tests/unit/test_import_cost.py --ignore=tests/dag_runs/faults/test_kill_and_restart.py

## Everything but real Slurm.
test-fast: install
	$(PY) -m pytest -q -m "not slurm and not deployment" -p no:cacheprovider $(XDIST) $(COV)

## Only the real-Slurm suite.
test-slurm: install slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY) -m pytest -q -m slurm -p no:cacheprovider

## Real Slurm 26.05 in its own lab (beside 24.11, own ports): the part of the live suite that differs
## by API version, with every version 26.05 serves (v0.0.42-45) and with "auto" (tests/README.md).
SLURM26_TESTS ?= tests/live_slurm/test_versions_envelopes.py tests/live_slurm/test_outcomes.py \
	tests/live_slurm/test_cancel.py tests/live_slurm/test_job_output.py
test-slurm-26: install
	SLURM_LAB_SLURM=26.05 scripts/slurm-lab up
	@export SLURM_LAB_SLURM=26.05 SLURM_LIVE_API_VERSION=auto && eval "$$(scripts/slurm-lab env)" && \
		$(PY) -m pytest -q -p no:cacheprovider -m slurm $(SLURM26_TESTS)

# The shell scripts shellcheck reads (the pre-commit hook picks the same by their shebang).
SHELL_SCRIPTS ?= scripts/slurm-lab .ci/run $(wildcard scripts/*.sh .ci/*.sh)

## ruff, ruff format, mypy and shellcheck: the checks of .pre-commit-config.yaml, on every file.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck $(SHELL_SCRIPTS)

## Benchmarks (bench/README.md): ratios against baselines measured in the same run.
bench: install
	$(PY) bench/run.py

slurm-lab-up:
	scripts/slurm-lab up

slurm-lab-down:
	scripts/slurm-lab down

clean:
	rm -rf .demo build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .coverage .coverage.* htmlcov
