"""A small JSON-over-HTTPS caller shared by the CloudResearch and Prolific backends (httpx)."""

import logging
import time

import httpx
from django.conf import settings

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
        Reported to mturk.calls with its answer or error (never with the key headers)."""
        operation = f"{method} {path.removeprefix(self.base_url).lstrip('/')}"
        sent = {"json": json, **({"headers": headers} if headers else {})}
        try:
            body = self._request(method, path, json=json, headers=headers, retry=retry)
        except PlatformError as error:
            calls.report(platform=self.name, operation=operation, request=sent, error=str(error),
                         response=getattr(error, "response", None) or None)
            raise
        calls.report(platform=self.name, operation=operation, request=sent,
                     response=body if isinstance(body, dict) else {"body": body})
        return body

    def _request(self, method, path, *, json, headers, retry):
        url = path if path.startswith("http") else f"{self.base_url}/{path.lstrip('/')}"
        attempts = max(1, settings.PLATFORM_HTTP_MAX_ATTEMPTS) if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                response = httpx.request(method, url, json=json,
                                         headers={**self.headers, **(headers or {})},
                                         timeout=settings.PLATFORM_HTTP_TIMEOUT_SECONDS)
            except httpx.TransportError as error:
                if attempt < attempts:
                    self._back_off(attempt, str(error))
                    continue
                raise PlatformError(f"{self.name} could not be reached: {error}") from error
            if (response.status_code == 429 or response.status_code >= 500) and attempt < attempts:
                self._back_off(attempt, f"HTTP {response.status_code}")
                continue
            body = _body(response)
            if response.status_code >= 400:
                error_class = PlatformRequestError if response.status_code < 500 else PlatformError
                detail = body if isinstance(body, str) else (
                    body.get("detail") or body.get("error") or body)
                if error_class is PlatformRequestError:
                    raise PlatformRequestError(
                        f"{self.name} refused {method} {path} (HTTP {response.status_code}): {detail}",
                        code=str(response.status_code),
                        response=body if isinstance(body, dict) else {"body": body})
                raise PlatformError(f"{self.name} failed {method} {path} (HTTP "
                                    f"{response.status_code}): {detail}")
            return body
        raise AssertionError("unreachable")

    def _back_off(self, attempt, reason):
        delay = min(settings.PLATFORM_HTTP_RETRY_MAX_SECONDS,
                    settings.PLATFORM_HTTP_RETRY_BASE_SECONDS * 2 ** (attempt - 1))
        logger.warning("%s: %s; retry %d in %.2fs", self.name, reason, attempt, delay)
        time.sleep(delay)


def _body(response):
    if not response.content:
        return {}
    try:
        return response.json()
    except ValueError:
        return response.text
