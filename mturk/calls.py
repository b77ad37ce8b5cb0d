"""Every request our code makes of a platform, as it was made and answered.

A platform is called through two doors only: mturk.client.call for MTurk and
platforms.http.JsonApi.request for CloudResearch Connect and Prolific. Each door reports every call
here, failed or not. A service that audits a step opens `collect()` around it and writes what the
step called (mturk.services.audit.audited), so a call the step made on the way, a HIT type's
qualification type or a GetAssignment check, is in the audit log with the rest.
"""

import json
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

_collected = ContextVar("crowdbench_platform_calls", default=None)


@dataclass
class PlatformCall:
    platform: str
    operation: str
    request: dict
    response: object = None
    error: str = ""
    #: False when the request never left this machine (no credentials, refused by the client's
    #: own checks): the platform cannot have seen it.
    sent: bool = True
    #: How many times the client library sent it (its own retries included).
    attempts: int = 1

    def as_request(self):
        return {"platform": self.platform, "operation": self.operation, "request": self.request}

    def as_answer(self):
        retried = {"attempts": self.attempts} if self.attempts > 1 else {}
        if self.error:
            return {"operation": self.operation, "error": self.error, "sent": self.sent, **retried,
                    **({"response": self.response} if self.response else {})}
        return {"operation": self.operation, "response": self.response, **retried}


@contextmanager
def collect():
    """The calls made inside the block, in order (nested blocks each see their own)."""
    calls = []
    token = _collected.set(calls)
    try:
        yield calls
    finally:
        _collected.reset(token)


def report(*, platform, operation, request, response=None, error="", sent=True, attempts=1):
    calls = _collected.get()
    if calls is not None:
        calls.append(PlatformCall(platform=platform, operation=operation, request=_jsonable(request),
                                  response=_jsonable(response), error=error, sent=sent,
                                  attempts=attempts))


def _jsonable(value):
    return json.loads(json.dumps(value, default=str)) if value is not None else None
