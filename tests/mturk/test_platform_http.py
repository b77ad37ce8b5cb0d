"""Connect's and Prolific's HTTP client retries as the platform asks: Retry-After read in both of
its forms, waited for, and capped (against a loopback server that keeps the time of each request)."""

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from mturk import calls
from mturk.exceptions import PlatformError, PlatformRequestError
from mturk.platforms.prolific import ProlificApi
from tests.mturk_wire import FakePlatform

PATH = "studies/S1/submissions/"
OK = (200, {"results": [], "_links": {"next": {"href": None}}})


class ScriptedPlatform(FakePlatform):
    """Answers each request with the next scripted answer and notes when it came."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.times = []
        super().__init__()

    def route(self, method, path, headers, body):
        self.times.append(time.monotonic())
        return self.answers.pop(0)


@pytest.fixture
def serve(settings):
    servers = []

    def start(*answers):
        server = ScriptedPlatform(*answers)
        servers.append(server)
        settings.PROLIFIC_API_URL, settings.PROLIFIC_API_TOKEN = server.url, "token"
        settings.PLATFORM_HTTP_RETRY_BASE_SECONDS = 0.001
        return server

    yield start
    for server in servers:
        server.stop()


def gap(server):
    first, second = server.times
    return second - first


def test_a_429_is_retried_after_the_seconds_retry_after_names(serve):
    server = serve((429, {"detail": "slow down"}, {"Retry-After": "1"}), OK)
    with calls.collect() as made:
        assert ProlificApi().request("GET", PATH) == OK[1]
    assert 1.0 <= gap(server) < 1.5
    assert made[0].attempts == 2 and made[0].as_answer()["attempts"] == 2


def test_a_503_is_retried_after_the_http_date_retry_after_names(serve):
    # An HTTP date has whole seconds, so three seconds from now is between two and three away when
    # written, and a little less by the time the answer is read (it measured 0.999 s for "two").
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=3), usegmt=True)
    server = serve((503, {"detail": "maintenance"}, {"Retry-After": when}), OK)
    assert ProlificApi().request("GET", PATH) == OK[1]
    assert 1.5 <= gap(server) < 3.5


def test_a_wait_longer_than_the_cap_fails_at_once_saying_when_to_try_again(serve, settings):
    settings.PLATFORM_HTTP_RETRY_MAX_SECONDS = 5
    server = serve((429, {"detail": "quota"}, {"Retry-After": "3600"}), OK)
    with pytest.raises(PlatformRequestError, match="called again in 3600 s"):
        ProlificApi().request("GET", PATH)
    assert len(server.times) == 1


def test_without_retry_after_a_5xx_is_retried_with_backoff_until_the_attempts_run_out(serve, settings):
    settings.PLATFORM_HTTP_MAX_ATTEMPTS = 3
    server = serve(*[(502, {"detail": "bad gateway"})] * 3)
    with calls.collect() as made, pytest.raises(PlatformError, match="HTTP 502"):
        ProlificApi().request("GET", PATH)
    assert len(server.times) == 3 and made[0].attempts == 3


def test_a_call_not_safe_to_repeat_is_sent_once_whatever_the_answer(serve):
    server = serve((503, {"detail": "busy"}, {"Retry-After": "1"}), OK)
    with pytest.raises(PlatformError, match="HTTP 503"):
        ProlificApi().request("POST", "submissions/bulk-approve/", json={"submission_ids": ["s"]},
                              retry=False)
    assert len(server.times) == 1
