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
        """Start it, on another port when the one chosen was taken meanwhile: two test processes
        starting at once can be given the same free port, and the second server, failing to bind,
        would leave its process pointed at the first's, where the other process's Celery worker
        then answers its pings and takes its jobs."""
        for _ in range(5):
            self.process = subprocess.Popen(
                [shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._answers_as_ours():
                return self
            self.stop()
            self.port = free_port()
        pytest.fail("redis-server did not start")

    def _answers_as_ours(self):
        """Whether the server on our port is the process we started."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                server = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1).info("server")
                return server["process_id"] == self.process.pid
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                time.sleep(0.05)
        return False

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
