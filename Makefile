# The two commands a new user needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/crowdbench
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15

.PHONY: install install-dev run test test-fast lint docs

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip

# `make run` installs what running needs, the demo's photos included; the test tools (pytest,
# Playwright, moto, ...) only come with `make test`.
$(VENV)/.installed-run: pyproject.toml | $(PY)
	$(VENV)/bin/pip install --quiet -e '.[demo]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(VENV)/bin/pip install --quiet -e '.[dev]'
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

test: install-dev
	scripts/ensure-services.sh
	scripts/ensure-browser.sh
	$(TEST_ENV) $(PY) -m pytest $(PYTEST_ARGS)

test-fast: install-dev
	scripts/ensure-services.sh
	$(TEST_ENV) $(PY) -m pytest -m "not browser and not integration" $(PYTEST_ARGS)

lint: install-dev
	$(VENV)/bin/ruff check .

# The documentation site (mkdocs.yml, docs/) into site/; strict, so a broken link or anchor fails.
# NO_MKDOCS_2_WARNING quiets Material's banner about its successor, which is not a build warning.
docs: install-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The production processes docker/compose.yaml names, run here with its commands and settings,
# and one smoke journey through HTTP (scripts/production_check.py says what is and is not run).
production-check: install
	scripts/ensure-services.sh
	$(PY) scripts/production_check.py
