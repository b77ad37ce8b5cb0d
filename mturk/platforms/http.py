"""A small JSON-over-HTTPS caller shared by the CloudResearch and Prolific backends (httpx), retried
by tenacity.

A 429 or 5xx answer and a failed connection are tried again, up to PLATFORM_HTTP_MAX_ATTEMPTS
attempts in all, when the caller says the request is safe to repeat. The wait is what the platform
asked for in Retry-After (seconds or an HTTP date), else a doubling backoff; both are capped at
PLATFORM_HTTP_RETRY_MAX_SECONDS, and a platform that asks for a longer wait is not asked again
sooner than it said: the call fails at once, saying when to try again.
"""

import logging
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx
from django.conf import settings
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
)

from mturk import calls
from mturk.exceptions import PlatformError, PlatformRequestError

logger = logging.getLogger(__name__)


class JsonApi:
    name = ""

    def __init__(self, base_url, headers):
        self.base_url = base_url.rstrip("/")
        self.headers = headers

    def request(self, method, path, *, json=None, headers=None, retry=True):
        """Send one request; 429 and 5xx are retried when `retry` (the call is safe to repeat).
        Reported to mturk.calls with its answer or error and the attempts it took (never with the
        key headers)."""
        operation = f"{method} {path.removeprefix(self.base_url).lstrip('/')}"
        sent = {"json": json, **({"headers": headers} if headers else {})}
        url = path if path.startswith("http") else f"{self.base_url}/{path.lstrip('/')}"
        retrying = self._retrying(retry)
        try:
            response = retrying(httpx.request, method, url, json=json,
                                headers={**self.headers, **(headers or {})},
                                timeout=settings.PLATFORM_HTTP_TIMEOUT_SECONDS)
            body = self._answer(method, path, response)
        except httpx.TransportError as error:
            failure = PlatformError(f"{self.name} could not be reached: {error}")
            calls.report(platform=self.name, operation=operation, request=sent, error=str(failure),
                         attempts=retrying.statistics["attempt_number"])
            raise failure from error
        except PlatformError as error:
            calls.report(platform=self.name, operation=operation, request=sent, error=str(error),
                         response=getattr(error, "response", None) or None,
                         attempts=retrying.statistics["attempt_number"])
            raise
        calls.report(platform=self.name, operation=operation, request=sent,
                     response=body if isinstance(body, dict) else {"body": body},
                     attempts=retrying.statistics["attempt_number"])
        return body

    def _retrying(self, retry):
        return Retrying(
            retry=retry_if_exception_type(httpx.TransportError) | retry_if_result(_try_again),
            stop=stop_after_attempt(max(1, settings.PLATFORM_HTTP_MAX_ATTEMPTS) if retry else 1)
            | _told_to_wait_too_long,
            wait=_wait,
            before_sleep=self._log_retry,
            # Out of attempts: the last answer (or exception) is the caller's to read.
            retry_error_callback=lambda state: state.outcome.result(),
        )

    def _log_retry(self, state: RetryCallState):
        outcome = state.outcome
        reason = str(outcome.exception()) if outcome.failed else f"HTTP {outcome.result().status_code}"
        # next_action, not upcoming_sleep: tenacity is held below 8.3 (toloka-kit), which has only it.
        logger.warning("%s: %s; retry %d in %.2fs", self.name, reason, state.attempt_number,
                       state.next_action.sleep)

    def _answer(self, method, path, response):
        body = _body(response)
        if response.status_code < 400:
            return body
        detail = body if isinstance(body, str) else body.get("detail") or body.get("error") or body
        wait = retry_after(response)
        later = (f". It asked to be called again in {wait:.0f} s, not sooner"
                 if wait is not None and _try_again(response) else "")
        if response.status_code < 500:
            raise PlatformRequestError(
                f"{self.name} refused {method} {path} (HTTP {response.status_code}): {detail}{later}",
                code=str(response.status_code),
                response=body if isinstance(body, dict) else {"body": body})
        raise PlatformError(f"{self.name} failed {method} {path} (HTTP {response.status_code}): "
                            f"{detail}{later}")


def _try_again(response):
    return response.status_code == 429 or response.status_code >= 500


def retry_after(response):
    """The seconds a response's Retry-After asks for (RFC 9110: a number of seconds or an HTTP
    date), or None when it has none we can read."""
    value = (response.headers.get("Retry-After") or "").strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _asked_wait(state: RetryCallState):
    outcome = state.outcome
    if outcome is None or outcome.failed:
        return None
    return retry_after(outcome.result())


def _told_to_wait_too_long(state: RetryCallState):
    asked = _asked_wait(state)
    return asked is not None and asked > settings.PLATFORM_HTTP_RETRY_MAX_SECONDS


def _wait(state: RetryCallState):
    asked = _asked_wait(state)
    if asked is not None:
        return min(asked, settings.PLATFORM_HTTP_RETRY_MAX_SECONDS)
    return wait_exponential(multiplier=settings.PLATFORM_HTTP_RETRY_BASE_SECONDS,
                            max=settings.PLATFORM_HTTP_RETRY_MAX_SECONDS)(state)


def _body(response):
    if not response.content:
        return {}
    try:
        return response.json()
    except ValueError:
        return response.text
