# The two commands a new user needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/crowdbench
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15

.PHONY: install run test test-fast lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput -v0
	$(PY) manage.py load_demo
	scripts/run-local.sh

test: install
	scripts/ensure-services.sh
	scripts/ensure-browser.sh
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(PY) -m pytest $(PYTEST_ARGS)

test-fast: install
	scripts/ensure-services.sh
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(PY) -m pytest -m "not browser and not integration" $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
