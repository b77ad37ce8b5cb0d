"""A real Celery worker process against the test database and broker, for the integration tests
(the `start_worker` fixture in tests/conftest.py)."""

import os
import signal
import subprocess
import sys
import time
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

WAIT_SECONDS = 60


def _test_database_url():
    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    return (f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/"
            f"{quote(db['NAME'], safe='')}")


class CeleryWorker:
    def __init__(self, *, log_path, openai_base_url, extra_args=(), **environment):
        self.log_path = log_path
        self.nodename = f"crowdbench-test-{os.getpid()}@%h"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "crowdbench.settings",
            "DATABASE_URL": _test_database_url(),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "OPENAI_BASE_URL": openai_base_url,
            "ENDPOINT_MODEL_ALLOWED_NETWORKS": "127.0.0.0/8",
            "OPENAI_API_KEY": "test-key",
            "OPENAI_REFERENCE_MODEL": "gpt-4",
            # The leaderboard job's figures go where this test process reads them, not into the checkout.
            "FIGURES_LOCATION": settings.STORAGES["figures"]["OPTIONS"]["location"],
            **environment,
        }
        self._log = open(log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "crowdbench", "worker", "--pool=solo",
             "--concurrency=1", "-Q", "celery", "--loglevel=INFO", "-n", self.nodename,
             "--without-gossip", "--without-mingle", "--without-heartbeat", *extra_args],
            cwd=settings.BASE_DIR, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self):
        return self.log_path.read_text()

    def wait_for_log(self, text, *, count=1):
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            if self.log().count(text) >= count:
                return
            if self.process.poll() is not None:
                pytest.fail(f"The Celery worker exited ({self.process.returncode}):\n{self.log()}")
            time.sleep(0.2)
        pytest.fail(f"The worker log never showed {text!r} {count} time(s):\n{self.log()}")

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


def wait_for(condition, *, what, worker):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"Timed out waiting for {what}. Worker log:\n{worker.log()}")


