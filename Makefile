# The two commands a new user needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/crowdbench
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15

.PHONY: install install-dev run test test-fast lint docs lock lock-check

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip

# `make run` installs what running needs, the demo's photos included; the test tools (pytest,
# Playwright, moto, ...) only come with `make test`. Both install the exact versions and files of
# their lock (see `make lock` below), then the project itself without resolving anything more.
LOCK_RUN := requirements/run.txt
LOCK_DEV := requirements/dev.txt

$(VENV)/.installed-run: $(LOCK_RUN) pyproject.toml | $(PY)
	$(VENV)/bin/pip install --quiet --no-deps --require-hashes -r $(LOCK_RUN)
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

$(VENV)/.installed-dev: $(LOCK_DEV) pyproject.toml | $(PY)
	$(VENV)/bin/pip install --quiet --no-deps --require-hashes -r $(LOCK_DEV)
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

install: $(VENV)/.installed-run

install-dev: $(VENV)/.installed-dev

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput -v0
	$(PY) manage.py load_demo
	scripts/run-local.sh

# Connections closed after each request in tests: the threads of the live server and of the
# concurrency tests would otherwise keep theirs open past the test database's teardown.
TEST_ENV = DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) DATABASE_CONN_MAX_AGE=0
# One pytest-xdist worker per core, each with its own test database (pytest-django names it) and
# its own redis-server (tests/conftest.py); a module's tests stay on one worker, so its browser and
# fixtures start once. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= auto
XDIST = -n $(TEST_WORKERS) --dist loadfile

test: install-dev
	scripts/ensure-services.sh
	scripts/ensure-browser.sh
	$(TEST_ENV) $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: install-dev
	scripts/ensure-services.sh
	$(TEST_ENV) $(PY) -m pytest $(XDIST) -m "not browser and not integration" $(PYTEST_ARGS)

lint: install-dev
	$(VENV)/bin/ruff check .

# The documentation site (mkdocs.yml, docs/) into site/; strict, so a broken link or anchor fails.
# NO_MKDOCS_2_WARNING quiets Material's banner about its successor, which is not a build warning.
docs: install-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The production processes docker/compose.yaml names, run here with its commands and settings,
# and one smoke journey through HTTP (scripts/production_check.py says what is and is not run).
# Its S3 stand-in (moto's server) and model stand-in come with the test tools, so it installs them.
production-check: install-dev
	scripts/ensure-services.sh
	$(PY) scripts/production_check.py

# --- The lock: requirements/base.txt (the Docker image), run.txt (`make run`), dev.txt (`make test`)
# `make lock` resolves pyproject.toml with uv into those three files, every package pinned with the
# hashes of its files; it keeps every pin it can, so after adding a dependency to pyproject.toml it
# changes only what the new one needs. Commit the lock files with pyproject.toml: CI's
# `make lock-check` fails while they were made from other dependency lists than pyproject.toml's.
# Upgrading is a choice, reviewed as a diff of the lock files, then `make test`:
#   make lock LOCK_ARGS="--upgrade-package django"   one package (and what it needs)
#   make lock LOCK_ARGS=--upgrade                     everything to the newest release allowed
lock: install-dev
	$(PY) scripts/lock.py write --uv $(VENV)/bin/uv $(LOCK_ARGS)

# Standard library only: no venv needed, and it takes a moment.
lock-check:
	$(PYTHON) scripts/lock.py check
