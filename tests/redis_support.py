"""A redis-server of a test's own, and pointing Celery at it."""

import os
import shutil
import socket
import subprocess
import time

import pytest
import redis

from crowdbench.celery import app


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OwnRedis:
    """A redis-server of its own, without persistence, on its own port."""

    def __init__(self, directory):
        self.port, self.dir, self.process = free_port(), directory, None

    @staticmethod
    def installed():
        return shutil.which("redis-server") is not None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.process = subprocess.Popen(
            [shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        pytest.fail("redis-server did not start")

    def client(self):
        return redis.Redis.from_url(self.url)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def use_broker(url):
    # Celery reads CELERY_BROKER_URL from the environment before its own configuration, and the
    # processes tests start (workers, servers) inherit it.
    os.environ["CELERY_BROKER_URL"] = app.conf.broker_url = url
    # The app keeps its pools of the broker it first met; kombu keeps one per broker address.
    app._pool = None
    app.amqp._producer_pool = None
