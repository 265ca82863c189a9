# mysqlcapture: `make` lists the targets. Everything slow is cached outside the repository
# (~/.cache/mysqlcapture): the Python virtual environment, keyed by the hash of pyproject.toml.

SHELL := /bin/bash
CACHE ?= $(HOME)/.cache/mysqlcapture
# Where the tests and the scripts they run look for what `make setup` cached (the control plane, the CRDs).
export MYSQLCAPTURE_CACHE := $(CACHE)
PY_HASH := $(shell sha256sum pyproject.toml | cut -c1-12)
VENV ?= $(CACHE)/venv-$(PY_HASH)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Defined before `setup`: make expands a rule's prerequisites when it reads the rule.
NATIVE_SOURCES := $(wildcard worker/native/src/*.rs) worker/native/mysqlcapture_native.pyi worker/native/Cargo.toml worker/native/Cargo.lock worker/native/pyproject.toml
NATIVE_STAMP := $(VENV)/.native-installed
DEB_PACKAGES := mariadb-server mariadb-client openjdk-17-jre-headless maven prometheus openssl
PYTEST_ARGS ?=
# The cached virtual environment is shared by checkouts with the same pyproject.toml, and its editable
# install points at whichever checkout created it (which may be gone since): tests (and the processes they start)
# import this one through $$PYTHONPATH, and the environment's own commands (`mysqlcapture`, `mysqlcapture-compact`)
# through a .pth file naming the checkout that last ran `make` here (`venv-checkout`).
CHECKOUT_DIRS := $(CURDIR)/api $(CURDIR)/worker $(CURDIR)/operator $(CURDIR)/spark $(CURDIR)/dev
SOURCES := PYTHONPATH=$(subst $(eval) ,:,$(CHECKOUT_DIRS)):$(CURDIR)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: setup
setup: demo-setup mysql-server control-plane thirdparty-crds kafka-broker ## install everything: Debian packages, the Python virtual environment, Delta jars, MySQL, the test control plane, third-party CRDs, the tests' Kafka broker

# What `make demo` uses, and no more: the test control plane is built by `make setup` (for `make test`) only, and
# MySQL is fetched only for FLAVOR=mysql.
.PHONY: demo-setup
demo-setup: deb-packages $(STAMP) venv-checkout $(NATIVE_STAMP) spark-jars

# The environment's commands import this checkout: its source directories, one per line, in a .pth file of the
# environment's site-packages (ahead of the editable install's finder, which Python consults last), rewritten when
# another checkout wrote it. `make venv-path` (README's way to the commands) does it too.
define POINT_VENV_HERE
pth="$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/mysqlcapture-checkout.pth"; \
want="$$(printf '%s\n' $(CHECKOUT_DIRS))"; \
[ "$$(cat "$$pth" 2>/dev/null)" = "$$want" ] || printf '%s\n' "$$want" > "$$pth"
endef
.PHONY: venv-checkout
venv-checkout: $(STAMP)
	@$(POINT_VENV_HERE)

# Debian sid's MySQL server (mysql-server-core, 9.7 LTS) and its library closure, unpacked into the cache with a
# private apt state: the system's apt sources and packages are untouched. A failed fetch is recorded in
# $(MYSQL_HOME)/FAILED and the MySQL test tier fails with that reason.
MYSQL_HOME ?= $(CACHE)/mysql-sid
export MYSQLCAPTURE_MYSQL_HOME := $(MYSQL_HOME)
.PHONY: mysql-server
mysql-server: ## fetch Debian sid's MySQL server into $(MYSQL_HOME) when missing (~10 s, 55 MB)
	@bash tests/mysql/fetch-mysql.sh $(MYSQL_HOME)

# Spark resolves the pinned Delta jars from Maven Central once, into a cache outside the repository;
# sessions load those files (spark.jars), so no test or job downloads anything.
SPARK_JARS ?= $(CACHE)/ivy
.PHONY: spark-jars
spark-jars: $(STAMP) ## pre-resolve the pinned Delta Lake jars into $(SPARK_JARS)
	@MYSQLCAPTURE_SPARK_JARS=$(SPARK_JARS) $(SOURCES) $(PY) -m mysqlcapture_compaction.session >/dev/null 2>&1 || { \
	  echo "==> resolving the pinned Delta Lake jars from Maven Central into $(SPARK_JARS) (about 30 s cold)"; \
	  mkdir -p $(SPARK_JARS); \
	  MYSQLCAPTURE_SPARK_JARS=$(SPARK_JARS) $(SOURCES) $(PY) -m mysqlcapture_compaction.session --resolve \
	    >$(SPARK_JARS)/resolve.log 2>&1 || { cat $(SPARK_JARS)/resolve.log; exit 1; }; }

# etcd, kube-apiserver and kube-controller-manager built from the published Go modules (the k8s test tier's
# real control plane), cached by version outside the repository; built only when missing.
K8S_VERSION ?= v1.36.3
.PHONY: control-plane
control-plane: ## build the test control plane into $(CACHE)/k8s-$(K8S_VERSION) when missing (cold: ~13 min)
	@K8S_VERSION=$(K8S_VERSION) bash tests/k8s/build-control-plane.sh $(CACHE)/k8s-$(K8S_VERSION)

# The Spark operator's and the Prometheus operator's CRDs, which the k8s tests install, copied out of their projects'
# Go modules (pinned with their sums in tests/k8s/thirdparty-crds.pins) into the cache. A failed fetch is recorded
# with its reason, which the tests that need them report; they also run the script themselves (instant when cached).
.PHONY: thirdparty-crds
thirdparty-crds: ## fetch the pinned Spark and Prometheus operator CRDs into $(CACHE) when missing (~1 s, 2 MB)
	@bash tests/k8s/fetch-thirdparty-crds.sh >/dev/null

# The Kafka sink's tests run a real broker: Apache Kafka's jars from Maven Central (tests/kafka/pom.xml, pinned),
# copied into the cache once; the tests start it as one local JVM (KRaft: broker and controller).
.PHONY: kafka-broker
kafka-broker: ## fetch the tests' Kafka broker jars into $(CACHE)/kafka when missing (~10 s, 43 MB)
	@bash tests/kafka/fetch-kafka.sh $(CACHE)/kafka

.PHONY: deb-packages
deb-packages:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# The worker's compiled fast path (worker/native, Rust via PyO3/maturin), built from source into the virtual
# environment; cargo's build cache stays outside the repository. Rebuilt when its sources change.
.PHONY: native
native: $(NATIVE_STAMP) ## build the worker's compiled row renderer (needs cargo) into the virtual environment

$(NATIVE_STAMP): $(NATIVE_SOURCES) | $(STAMP)
	@command -v cargo >/dev/null || { echo "cargo (Rust) is needed to build worker/native: https://rustup.rs or apt-get install cargo"; exit 1; }
	@echo "==> building the worker's compiled renderer (worker/native, Rust; about 2 minutes cold)"
	@CARGO_TARGET_DIR=$(CACHE)/native-target $(PY) -m pip install -q ./worker/native >$(CACHE)/native.log 2>&1 \
	  || { cat $(CACHE)/native.log; exit 1; }
	@touch $@

$(STAMP): pyproject.toml
	@mkdir -p $(CACHE)
	@echo "==> installing the Python packages into $(VENV) (about 2 minutes cold)"
	@test -x $(PY) || python3 -m venv $(VENV)
	@# Editable, for the console scripts; the venv is shared by every checkout with this pyproject.toml, so
	@# its editable paths may name another checkout: every target runs the code with $$PYTHONPATH in front.
	@{ $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[dev,worker,spark,operator]'; } \
	  >$(CACHE)/pip.log 2>&1 || { cat $(CACHE)/pip.log; exit 1; }
	@touch $@

.PHONY: test
test: setup ## lint, then every test tier against real servers
	$(MAKE) --no-print-directory verify
ifeq ($(strip $(PYTEST_ARGS)),)
	$(SOURCES) PY=$(PY) tests/run-tiers.sh
else
	$(SOURCES) $(PY) -m pytest $(PYTEST_ARGS)
endif

.PHONY: test-unit
test-unit: setup ## the quick loop: unit tests only
	$(SOURCES) $(PY) -m pytest -m unit $(PYTEST_ARGS)

.PHONY: lint
lint: setup ## ruff, mypy and the import contracts (.importlinter)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(SOURCES) $(VENV)/bin/lint-imports --no-cache

.PHONY: crds
# The chart carries copies of the CRD, the alert rules and the dashboard (Helm reads only files inside the
# chart); tests/k8s/test_chart.py fails when a copy differs from its source.
CHART := charts/mysqlcapture-operator
crds: setup ## regenerate crds/ from the one MySQLCapture definition; refresh the chart's copies
	$(SOURCES) $(PY) -m mysqlcapture_api.crd > crds/cdc.mysqlcapture.io_mysqlcaptures.yaml
	cp crds/cdc.mysqlcapture.io_mysqlcaptures.yaml $(CHART)/files/crds/
	cp monitoring/alerts.yaml $(CHART)/files/alerts.yaml
	cp monitoring/dashboards/mysqlcapture.json $(CHART)/files/dashboards/mysqlcapture.json

.PHONY: verify
verify: lint ## lint and check that crds/ matches the spec
	$(SOURCES) $(PY) -m mysqlcapture_api.crd --check crds/cdc.mysqlcapture.io_mysqlcaptures.yaml
	@cmp crds/cdc.mysqlcapture.io_mysqlcaptures.yaml $(CHART)/files/crds/cdc.mysqlcapture.io_mysqlcaptures.yaml \
	  && cmp monitoring/alerts.yaml $(CHART)/files/alerts.yaml \
	  && cmp monitoring/dashboards/mysqlcapture.json $(CHART)/files/dashboards/mysqlcapture.json \
	  || { echo "the chart's copies differ from crds/ and monitoring/: run \`make crds\`"; exit 1; }

.PHONY: e2e-kind
e2e-kind: $(STAMP) ## with Docker and kind: images, chart, a MariaDB and a capture in a kind cluster (not run by CI)
	$(SOURCES) PYTHON=$(PY) bash tests/k8s/kind/e2e-kind.sh

FLAVOR ?= mariadb
.PHONY: demo
demo: demo-setup $(if $(filter mysql,$(FLAVOR)),mysql-server) ## the embedded default: private MariaDB (FLAVOR=mysql: MySQL), a workload, the worker, a change log, a summary
	$(SOURCES) $(PY) -m mysqlcapture_dev.demo --flavor $(FLAVOR)

.PHONY: source
source: demo-setup $(if $(filter mysql,$(FLAVOR)),mysql-server) ## a private source to try `mysqlcapture check`/`run` on (FLAVOR=mysql: MySQL), with a capture user and a manifest, until Ctrl-C
	$(SOURCES) $(PY) -m mysqlcapture_dev.source --flavor $(FLAVOR) --venv $(VENV)

.PHONY: bench
bench: setup ## one run: streaming and snapshot rates on MariaDB and MySQL, compaction, each beside its baseline
	$(SOURCES) $(PY) bench/bench.py $(BENCH_ARGS)

.PHONY: clean
clean: ## remove build leftovers (the cached virtual environment stays; rm -rf $(CACHE) for that)
	rm -rf .pytest_cache .mypy_cache .ruff_cache build *.egg-info */*.egg-info demo-output

.PHONY: venv-path
venv-path: ## print the cached virtual environment's path (after `make setup`); its commands then run this checkout
	@if [ -x $(PY) ]; then $(POINT_VENV_HERE); fi
	@echo $(VENV)
