# Two commands matter: `make demo` and `make test`. Each builds its own venv with uv first (the demo's
# .venv-demo holds only what it runs; .venv holds the test and dev tools too).
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

# Cloud Composer's oldest Airflow in support, 2.10.5, under the whole pin set of its image (every pin a
# constraint, requirements/composer/): the operator, sensor, trigger and DAG-run suites and the
# deployment scenarios run on what a Composer 2.10.5 environment holds.
VENV2105 ?= .venv-airflow2105
PY2105   := $(VENV2105)/bin/python
COMPOSER_2105 := requirements/composer/composer-2.15.3-airflow-2.10.5.txt

# Cloud Composer 3's oldest Airflow 3 image, 3.1.8: its Task SDK lacks names 3.2 added (conf, the task
# exceptions), so 3.2.2 cannot stand for it; the suites that import Airflow run on it too.
VENV31 ?= .venv-airflow31
PY31   := $(VENV31)/bin/python
AIRFLOW_31 ?= 3.1.8

# The newest Airflow 3 before 3.3 (triggers are not given on_kill): the safe_to_cancel path.
VENV3X ?= .venv-airflow3x
PY3X   := $(VENV3X)/bin/python
AIRFLOW_3X ?= 3.2.2
# Without Airflow's constraints file, pip takes cadwyn 9, which refuses the pydantic the rest resolves
# to (the api-server and dag-processor then die at import): the set that 3.3.2 runs on works for 3.2.
AIRFLOW_3X_PINS ?= "cadwyn==7.0.0" "fastapi==0.136.3" "pydantic==2.14.4"

# The next Airflow, 3.4, while it is a pre-release: pinned to one beta (and its Task SDK), so the unit
# suites that import Airflow show what the next release changes before Composer ships it.
VENV34 ?= .venv-airflow34
PY34   := $(VENV34)/bin/python
AIRFLOW_34_PINS ?= "apache-airflow==3.4.0b2" "apache-airflow-core==3.4.0b2" "apache-airflow-task-sdk==1.4.0b2"

# uv makes every venv and installs into it: the uv on PATH, else uv of the version pinned in
# scripts/bootstrap_uv.py, which that script downloads with the standard library alone (checked against
# its pinned sha256) into .tools/ (git-ignored). A bare Debian 12 has neither pip nor a working venv
# module in its python3, and uv needs neither (`make test-bare-debian` proves it there).
UV_ON_PATH := $(shell command -v uv 2>/dev/null)
UV_PINNED  := $(CURDIR)/.tools/uv-$(shell sed -n 's/^VERSION = "\(.*\)"$$/\1/p' scripts/bootstrap_uv.py)/uv
UV         ?= $(or $(UV_ON_PATH),$(UV_PINNED))

$(UV_PINNED):
	$(PYTHON) scripts/bootstrap_uv.py >/dev/null

# The lock files pin every package of the test venvs (resolved for CI: Linux x86_64, Python 3.11), so
# two installs on two days get the same versions; the install targets use them as constraints.
# `make lock` rewrites them after a change of pyproject.toml or of the Airflow pins above, keeping every
# other pin it can; `make lock LOCK_FLAGS=--upgrade` moves everything to the newest versions. The
# 2.10.5 lock is resolved under the Composer pins: it moves none of them.
LOCK     := requirements/test-lock.txt
LOCK2    := requirements/test-lock-airflow2.txt
LOCK2105 := requirements/test-lock-airflow2105.txt
LOCK31   := requirements/test-lock-airflow31.txt
LOCK3X   := requirements/test-lock-airflow3x.txt
LOCK34   := requirements/test-lock-airflow34.txt
AIRFLOW_2 ?= "apache-airflow==2.11.*" apache-airflow-providers-google
# The test tools are PEP 735 dependency groups of pyproject.toml (never published): `test` in every
# venv, `dev` (linters, build, twine) in the main one only.
COMPILE  := $(UV) pip compile --quiet --python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
	--custom-compile-command "make lock" --no-emit-package slurmapi-emulator --group test $(LOCK_FLAGS) pyproject.toml
UV_VENV   = @test -x $(1)/bin/python || $(UV) venv --quiet --python 3.11 $(1) 2>/dev/null || $(UV) venv --quiet $(1)

.PHONY: demo test test-fast test-slurm test-slurm-26 test-airflow2 test-airflow2105 test-airflow31 test-airflow34 test-deployment test-deployment-airflow2 \
	test-deployment-airflow2105 test-deployment-airflow3x test-deployment-scale deployment-deps lint bench bench-quick bench-triggerer test-bare-debian slurm-lab-up slurm-lab-down \
	clean install lock dist pins docs

$(VENV)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK) | $(UV)
	$(call UV_VENV,$(VENV))
	$(UV) pip install --quiet -p $(PY) -c $(LOCK) -e . --group test --group dev
	@touch $@

install: $(VENV)/.installed

## Rewrite the lock files of the six test venvs (see LOCK above); commit them with the change.
lock: | $(UV)
	$(COMPILE) --group dev -o $(LOCK)
	printf '%s\n' $(AIRFLOW_2) | $(COMPILE) - -o $(LOCK2)
	$(COMPILE) -c $(COMPOSER_2105) -o $(LOCK2105)
	printf '%s\n' "apache-airflow==$(AIRFLOW_31)" apache-airflow-providers-google | $(COMPILE) - -o $(LOCK31)
	printf '%s\n' "apache-airflow==$(AIRFLOW_3X)" apache-airflow-providers-google $(AIRFLOW_3X_PINS) | $(COMPILE) - -o $(LOCK3X)
	printf '%s\n' $(AIRFLOW_34_PINS) apache-airflow-providers-google | $(COMPILE) - -o $(LOCK34)

# Airflow 2.11 beside the main (3.x) venv, for the compatibility run.
$(VENV2)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK2) | $(UV)
	$(call UV_VENV,$(VENV2))
	$(UV) pip install --quiet -p $(PY2) -c $(LOCK2) $(AIRFLOW_2) -e . --group test
	@touch $@

$(VENV2105)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK2105) $(COMPOSER_2105) | $(UV)
	$(call UV_VENV,$(VENV2105))
	$(UV) pip install --quiet -p $(PY2105) -c $(COMPOSER_2105) -c $(LOCK2105) -e . --group test
	@touch $@

$(VENV31)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK31) | $(UV)
	$(call UV_VENV,$(VENV31))
	$(UV) pip install --quiet -p $(PY31) -c $(LOCK31) "apache-airflow==$(AIRFLOW_31)" apache-airflow-providers-google -e . --group test
	@touch $@

$(VENV3X)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK3X) | $(UV)
	$(call UV_VENV,$(VENV3X))
	$(UV) pip install --quiet -p $(PY3X) -c $(LOCK3X) "apache-airflow==$(AIRFLOW_3X)" apache-airflow-providers-google $(AIRFLOW_3X_PINS) -e . --group test
	@touch $@

$(VENV34)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK34) | $(UV)
	$(call UV_VENV,$(VENV34))
	$(UV) pip install --quiet -p $(PY34) -c $(LOCK34) $(AIRFLOW_34_PINS) apache-airflow-providers-google -e . --group test
	@touch $@

# The demo's own venv: the provider (with Airflow and the Google provider) and the emulator, nothing of
# the test and dev groups, at the versions the main lock pins (a constraints file for that subset).
VENV_DEMO ?= .venv-demo
PY_DEMO   := $(VENV_DEMO)/bin/python
$(VENV_DEMO)/.installed: pyproject.toml emulator/pyproject.toml $(LOCK) | $(UV)
	$(call UV_VENV,$(VENV_DEMO))
	$(UV) pip install --quiet -p $(PY_DEMO) -c $(LOCK) -e . -e ./emulator
	@touch $@

## Run example_dags/example_slurm_submit.py end to end against the local emulator (in .venv-demo).
demo: $(VENV_DEMO)/.installed
	$(PY_DEMO) scripts/demo.py

## The documentation site (docs/, Sphinx) in docs/_build/html, every warning an error. `make test` runs
## the same build in tests/docs/test_docs.py (with a page and a config option added), not twice.
docs: install
	$(VENV)/bin/sphinx-build -W --keep-going -n -q -b html docs docs/_build/html
	@echo "docs/_build/html/index.html"

# The suites that import Airflow, run again on each older Airflow (the Airflow-free core, the emulator
# and the packaging tests prove the same on every version: the main run has them). Airflow 2 has no
# supervisor process for a test to kill (test_kill_and_restart.py) and imports a heavier set at startup
# (test_import_cost.py measures 3.x's).
AIRFLOW_UNIT_SUITES ?= tests/unit/hooks tests/unit/operators tests/unit/sensors tests/unit/triggers \
	tests/unit/test_airflow_surface.py
AIRFLOW_SUITES ?= $(AIRFLOW_UNIT_SUITES) tests/dag_runs
# Airflow 3.1 runs the unit suites: its imports, task runner calls, trigger and sensor paths are
# what differs from 3.2 (see tests/README.md); the DAG runs, which take minutes more, run on 3.3, 3.2's
# deployment, 2.11 and 2.10.5.
AIRFLOW_SUITES_2 ?= $(AIRFLOW_SUITES) --ignore=tests/dag_runs/faults/test_kill_and_restart.py

# The deployment scenarios whose behaviour depends on the Airflow version, run again on each older one
# (tests/README.md says why each): the provider list, the trigger's lines in the task log, a kill while
# deferred (before 3.3: the CancelledError and safe_to_cancel path), a triggerer restart (that path must
# not cancel), a clear while deferred, a killed task process (no task state store before 3.3), the
# deferral timeout (3.x), a SIGTERM during the submit (each version's handler). The 3.3 run has the rest.
DEPLOYMENT_BY_VERSION ?= providers_list or trigger_lines_in_the_log or mark_failed_while_deferred \
	or triggerer_sigterm_and_restart or clearing_a_deferred_task or task_process_and_supervisor_sigkill \
	or execution_timeout_with_every_worker_slot_busy or sigterm_while_the_submit_answer_is_late
# Airflow 2.10.5 against 2.11: the same triggerer, task runner, REST API v1 and trigger-timeout words
# (compared in their sources); it runs what installing under Composer's pins could break: the providers
# manager, a deferrable run with its trigger lines, the pre-3.3 kill path with its shutdown twin, and a
# SIGTERM during the submit (Airflow 2's handler raises inside the request).
DEPLOYMENT_AIRFLOW2105 ?= providers_list or trigger_lines_in_the_log or mark_failed_while_deferred \
	or triggerer_sigterm_and_restart or sigterm_while_the_submit_answer_is_late

# Each stage of `make test` prints its wall time ("CI time: NAME Ns"), so a slow part shows in the log;
# the real-Slurm suites also list their slowest tests (they wait on Slurm, so that is where time goes).
DURATIONS ?= --durations=15 --durations-min=20
TIMED = @start=$$(date +%s); status=0; $(2) || status=$$?; \
	echo "CI time: $(1) $$(( $$(date +%s) - start ))s"; exit $$status

## The whole suite, in stages (each timed): lint; then, side by side, the unit, emulator and Airflow DAG
## runs with coverage (CPU-heavy) and real Slurm 24.11 and 26.05 (two labs of their own, mostly waiting on
## Slurm jobs; brings the 24.11 lab up); a real Airflow deployment on 3.3 with its at-scale scenarios; then
## the older Airflow versions, each pairing a deployment (mostly waiting on Slurm jobs) with CPU work on the
## emulator; last the package (sdist, wheel, twine, the Composer pin sets), then the 3.1 and the 3.4.0b2
## suites, beside the 2.10.5 deployment. Deployments never run beside each other (the lab has 2 CPUs), and
## the 3.3 one, whose wave of 200 deferred tasks and kill within two polls are the most sensitive to a
## loaded machine, runs alone. On 2 cores the whole takes under an hour (tests/README.md gives the times).
test: install slurm-lab-up
	$(call TIMED,lint,$(MAKE) --no-print-directory lint)
	$(call TIMED,unit-emulator-dag-runs+slurm+slurm-26.05,$(MAKE) --no-print-directory -j3 --output-sync=target \
		test-fast test-slurm test-slurm-26)
	$(call TIMED,deployment-3.3,$(MAKE) --no-print-directory test-deployment)
	$(call TIMED,deployment-3.2+airflow-2.11,$(MAKE) --no-print-directory -j2 --output-sync=target test-deployment-airflow3x test-airflow2)
	$(call TIMED,deployment-2.11+airflow-2.10.5+bench-quick,$(MAKE) --no-print-directory -j2 --output-sync=target \
		test-deployment-airflow2 test-airflow2105 bench-quick)
	$(call TIMED,deployment-2.10.5+package+airflow-3.1+3.4+bare-debian,$(MAKE) --no-print-directory -j2 --output-sync=target \
		test-deployment-airflow2105 pins test-airflow31 test-airflow34 test-bare-debian)

## A real deployment on the real Slurm lab, driven through the REST API; prints the FIGURE lines it
## measures. On 3.3 it runs as Cloud Composer 3 does (tests/deployment/harness.py): PostgreSQL, the
## CeleryExecutor on a Redis broker, 2 Celery workers, 2 schedulers, 2 triggerers, a dag-processor and the
## api-server, with the at-scale scenarios (test_celery_scale.py, first on the fresh deployment): the tag
## key's first use, then one wave of 200 deferred tasks over 3 clusters that carries the restarts, the calls
## per cluster, a run of 60 marked failed and a triggerer's failover, then a Celery worker killed twice.
## `make test-deployment-scale` runs only those; their task counts come from SLURMAPI_*_TASKS.
test-deployment: install deployment-deps slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY) -m pytest -q -p no:cacheprovider -m deployment tests/deployment

test-deployment-scale: install deployment-deps slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY) -m pytest -q -p no:cacheprovider -m deployment \
		tests/deployment/test_celery_scale.py

## The version-dependent deployment scenarios (DEPLOYMENT_BY_VERSION) on the newest 3.x before 3.3, on
## 2.11 and on 2.10.5 under Composer's pins (own venvs). `DEPLOYMENT_BY_VERSION=` runs them all. On 3.2,
## the check of Airflow's public surface runs first (the other versions run it with their unit suites).
test-deployment-airflow3x: $(VENV3X)/.installed deployment-deps slurm-lab-up
	$(PY3X) -m pytest -q -p no:cacheprovider tests/unit/test_airflow_surface.py
	@eval "$$(scripts/slurm-lab env)" && $(PY3X) -m pytest -q -p no:cacheprovider -m deployment tests/deployment \
		$(if $(DEPLOYMENT_BY_VERSION),-k "$(DEPLOYMENT_BY_VERSION)")

test-deployment-airflow2: $(VENV2)/.installed deployment-deps slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY2) -m pytest -q -p no:cacheprovider -m deployment tests/deployment \
		$(if $(DEPLOYMENT_BY_VERSION),-k "$(DEPLOYMENT_BY_VERSION)")

test-deployment-airflow2105: $(VENV2105)/.installed deployment-deps slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY2105) -m pytest -q -p no:cacheprovider -m deployment tests/deployment \
		$(if $(DEPLOYMENT_BY_VERSION),-k "$(DEPLOYMENT_AIRFLOW2105)")

## PostgreSQL and Redis (the 3.3 deployment's Celery broker) from Debian's packages, for the deployment
## suite (as root; neither system service is started: the harness runs its own on free ports and dirs).
## A policy-rc.d already present (Docker's) is kept.
DEPLOYMENT_PACKAGES ?= postgresql redis-server
deployment-deps:
	@{ ls /usr/lib/postgresql/*/bin/initdb && command -v redis-server; } >/dev/null 2>&1 || { \
		test "$$(id -u)" = 0 || { echo "PostgreSQL or Redis missing: run 'make deployment-deps' as root" >&2; exit 1; }; \
		own=; test -e /usr/sbin/policy-rc.d || { own=1; printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; \
			chmod +x /usr/sbin/policy-rc.d; }; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEPLOYMENT_PACKAGES) >/dev/null; \
		status=$$?; test -z "$$own" || rm -f /usr/sbin/policy-rc.d; exit $$status; }

## The suites that import Airflow (AIRFLOW_SUITES) again on Airflow 2.11.
test-airflow2: $(VENV2)/.installed
	$(PY2) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile -m "not slurm and not deployment" $(AIRFLOW_SUITES_2)

## The unit suites on Airflow 3.1 (Composer 3's 3.1.8), and the DAG runs that read the tag's key from the
## Airflow Variable through 3.1's Task SDK (the unit suites set [slurmapi] tag_secret).
test-airflow31: $(VENV31)/.installed
	$(PY31) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile -m "not slurm and not deployment" $(AIRFLOW_UNIT_SUITES) \
		tests/dag_runs/test_tag_key.py

## The unit suites and the example DAGs' runs on the next Airflow, 3.4.0b2 (a pre-release, pinned:
## AIRFLOW_34_PINS); `make demo` runs on the main venv.
test-airflow34: $(VENV34)/.installed
	$(PY34) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile -m "not slurm and not deployment" $(AIRFLOW_UNIT_SUITES) \
		tests/dag_runs/test_example_dags.py --deselect tests/dag_runs/test_example_dags.py::test_make_demo_runs_clean

## The same on Airflow 2.10.5 under the pins of Composer's composer-2.15.3-airflow-2.10.5 image; then, on
## real Slurm with nothing configured, the exactly-once cases that have no task state store to lean on
## before 3.3 (SLURM2105_TESTS: a dead try's retry, lost submit answers, a submit carried out late).
SLURM2105_TESTS ?= tests/live_slurm/test_exactly_once_live.py tests/live_slurm/test_fault_matrix_live.py
SLURM2105_SELECT ?= died or settle or listing or late or reset-after or 503-after
test-airflow2105: $(VENV2105)/.installed slurm-lab-up
	$(PY2105) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile -m "not slurm and not deployment" $(AIRFLOW_SUITES_2)
	@eval "$$(scripts/slurm-lab env)" && $(PY2105) -m pytest -q -p no:cacheprovider -m slurm $(SLURM2105_TESTS) \
		-k "$(SLURM2105_SELECT)"

## The sdist and the wheel as PyPI takes them (dist/), checked by twine (strict: a warning fails).
dist: install
	rm -rf dist
	$(if $(UV_ON_PATH),,PATH="$(dir $(UV)):$$PATH") $(PY) -m build --installer uv --outdir dist .
	$(VENV)/bin/twine check --strict dist/*

## The wheel resolved on top of each Cloud Composer pin set (requirements/composer/): fails if a pin
## would move; prints what the resolver added beside the provider.
pins: dist
	$(PY) scripts/composer_pins.py dist/*.whl $(wildcard requirements/composer/*.txt)

## Everything but real Slurm and the deployments (with coverage and its floor).
test-fast: install
	$(PY) -m pytest -q -m "not slurm and not deployment" -p no:cacheprovider $(XDIST) $(COV)

## Only the real-Slurm suite (on 24.11; one test at a time: the lab has 2 CPUs).
test-slurm: install slurm-lab-up
	@eval "$$(scripts/slurm-lab env)" && $(PY) -m pytest -q -p no:cacheprovider $(DURATIONS) -m "slurm and not deployment"

## Real Slurm 26.05 in its own lab (beside 24.11, own ports): the part of the live suite that differs
## by API version, with every version 26.05 serves (v0.0.42-45) and with "auto" (tests/README.md).
SLURM26_TESTS ?= tests/live_slurm/test_versions_envelopes.py tests/live_slurm/test_outcomes.py \
	tests/live_slurm/test_cancel.py tests/live_slurm/test_job_output.py tests/live_slurm/test_tag_lookup_live.py \
	tests/live_slurm/test_exactly_once_live.py tests/live_slurm/test_fault_matrix_live.py
test-slurm-26: install
	SLURM_LAB_SLURM=26.05 scripts/slurm-lab up
	@export SLURM_LAB_SLURM=26.05 SLURM_LIVE_API_VERSION=auto && eval "$$(scripts/slurm-lab env)" && \
		$(PY) -m pytest -q -p no:cacheprovider $(DURATIONS) -m slurm $(SLURM26_TESTS)

# The shell scripts shellcheck reads (the pre-commit hook picks the same by their shebang).
SHELL_SCRIPTS ?= scripts/slurm-lab .ci/run $(wildcard scripts/*.sh .ci/*.sh)

## ruff, ruff format, mypy and shellcheck: the checks of .pre-commit-config.yaml, on every file.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck $(SHELL_SCRIPTS)

## Benchmarks (bench/README.md): ratios against baselines measured in the same run. They run in the
## main venv (`make install`), not the demo's. `make bench-quick` is the smoke run `make test` runs so that
## no part rots: it fails when a part crashes, never on a figure.
bench: install
	$(PY) bench/run.py

bench-quick: install
	$(PY) bench/run.py --quick

## Airflow's own `airflow triggerer` holding N = 100, 1,000 and 5,000 deferred waits in a cgroup (0.5 vCPU /
## 512 MiB, then 1 vCPU / 1 GiB), against the peer baseline (bench/triggerer.py; as root, over an hour on 2 cores).
bench-triggerer: install
	$(PY) bench/run.py --only triggerer

## The README's two commands on a bare Debian 12 (python3, git and make only) in a debootstrap chroot
## under /var/tmp, reused warm (scripts/test-bare-debian; as root).
test-bare-debian:
	scripts/test-bare-debian

slurm-lab-up:
	scripts/slurm-lab up

slurm-lab-down:
	scripts/slurm-lab down

clean:
	rm -rf .demo build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .coverage .coverage.* htmlcov
