# mysqlcapture: `make` lists the targets. Everything slow is cached outside the repository
# (~/.cache/mysqlcapture): the Python virtual environment, keyed by the hash of pyproject.toml.

SHELL := /bin/bash
CACHE ?= $(HOME)/.cache/mysqlcapture
PY_HASH := $(shell sha256sum pyproject.toml | cut -c1-12)
VENV ?= $(CACHE)/venv-$(PY_HASH)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEB_PACKAGES := mariadb-server mariadb-client openjdk-17-jre-headless prometheus
PYTEST_ARGS ?=
# The cached virtual environment is shared by checkouts with the same pyproject.toml, and its editable
# install points at whichever checkout created it: tests (and the processes they start) import this one.
SOURCES := PYTHONPATH=$(CURDIR)/api:$(CURDIR)/worker:$(CURDIR)/operator:$(CURDIR)/spark:$(CURDIR)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: setup
setup: deb-packages $(STAMP) spark-jars ## install everything: Debian packages, the Python virtual environment, Delta jars

# Spark resolves the pinned Delta jars from Maven Central once, into a cache outside the repository;
# sessions load those files (spark.jars), so no test or job downloads anything.
SPARK_JARS ?= $(CACHE)/ivy
.PHONY: spark-jars
spark-jars: $(STAMP) ## pre-resolve the pinned Delta Lake jars into $(SPARK_JARS)
	@MYSQLCAPTURE_SPARK_JARS=$(SPARK_JARS) $(PY) -m mysqlcapture_compaction.session --resolve >/dev/null

.PHONY: deb-packages
deb-packages:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

$(STAMP): pyproject.toml
	@mkdir -p $(CACHE)
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark]'
	@touch $@

.PHONY: test
test: setup ## run every test tier against real servers
	$(SOURCES) $(PY) -m pytest $(PYTEST_ARGS)

.PHONY: test-unit
test-unit: setup ## the quick loop: unit tests only
	$(SOURCES) $(PY) -m pytest -m unit $(PYTEST_ARGS)

.PHONY: lint
lint: setup ## ruff and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

.PHONY: crds
crds: setup ## regenerate crds/ from the one MySQLCapture definition
	$(PY) -m mysqlcapture_api.crd > crds/cdc.mysqlcapture.io_mysqlcaptures.yaml

.PHONY: verify
verify: lint ## lint and check that crds/ matches the spec
	$(PY) -m mysqlcapture_api.crd --check crds/cdc.mysqlcapture.io_mysqlcaptures.yaml

.PHONY: demo
demo: setup ## the embedded default: private MariaDB, a workload, the worker, a local change log, a summary
	$(SOURCES) $(PY) -m mysqlcapture_worker.demo

.PHONY: bench
bench: setup ## throughput figures: raw mysql-replication decode vs the worker end to end, peak RSS
	$(SOURCES) $(PY) bench/bench.py $(BENCH_ARGS)
	$(SOURCES) $(PY) bench/bench_compaction.py $(BENCH_COMPACTION_ARGS)

.PHONY: clean
clean: ## remove build leftovers (the cached virtual environment stays; rm -rf $(CACHE) for that)
	rm -rf .pytest_cache .mypy_cache .ruff_cache build *.egg-info */*.egg-info demo-output

.PHONY: venv-path
venv-path: ## print the cached virtual environment's path (after `make setup`)
	@echo $(VENV)
