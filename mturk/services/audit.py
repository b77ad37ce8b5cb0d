"""Who may pay, and the audit log every platform action writes (who, when, how much, every call it
made of the platform and what the platform answered, and whether anything was sent at all)."""

import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field

from annotation.models import Worker
from crowdbench.events import emit
from mturk import calls
from mturk.exceptions import PlatformError
from mturk.models import AuditLog

logger = logging.getLogger(__name__)


PAY_PERMISSION = "mturk.pay_workers"


def require_researcher(actor):
    if actor is None or not actor.is_active or not actor.is_staff or not actor.has_perm(PAY_PERMISSION):
        raise PlatformError("Only researchers allowed to pay workers can do this.")


def log(*, action, study=None, worker=None, submission=None, amount=None, actor=None, ok=True,
        request=None, response=None, error="", sent=True):
    platform = study.platform if study else (worker.platform if worker else Worker.Platform.LOCAL)
    row = AuditLog.objects.create(
        action=action, platform=platform, study=study, worker=worker, submission=submission,
        amount_usd=amount, actor=actor, ok=ok, sent_to_platform=sent, request=jsonable(request or {}),
        response=jsonable(response or {}), error=error,
    )
    # Every payment (a reward on approval, a bonus) the platform took is written here, in the
    # transaction that recorded it.
    if ok and sent and amount and action in (AuditLog.Action.APPROVE, AuditLog.Action.BONUS):
        emit(event="payment.made", scope=study, key=row.pk, payload={
            "kind": "bonus" if action == AuditLog.Action.BONUS else "reward", "amount_usd": str(amount),
            "platform": platform, "worker": worker.pseudonym if worker else None,
            "submission": submission.pk if submission else None})
    return row


@dataclass
class Step:
    """What a service adds to the row of an audited step, beyond the calls it made."""

    request: dict = field(default_factory=dict)
    response: dict = field(default_factory=dict)
    #: Set when the step failed without raising (a platform answer that says it did not happen).
    error: str = ""
    amount: object = None
    calls: list = field(default_factory=list)


@contextmanager
def audited(*, action, study=None, worker=None, submission=None, amount=None, actor=None,
            request=None, only_if_called=False):
    """Run one step that may call a platform, then write its audit row whatever happened: every
    call the step made with its request and answer or error, ok only when the step went through,
    and whether any request reached the platform. A PlatformError is written and raised again.

    The row is written when the block ends, so the block must not sit inside a transaction that
    the error rolls back: the row would go with it. `only_if_called`: a step that went through
    without calling anything (a HIT type already made) writes no row."""
    step = Step(request=dict(request or {}), amount=amount)
    with calls.collect() as made:
        step.calls = made
        try:
            yield step
        except PlatformError as error:
            _write(step, action=action, study=study, worker=worker, submission=submission,
                   actor=actor, error=str(error))
            raise
    if only_if_called and not made and not step.error:
        return
    _write(step, action=action, study=study, worker=worker, submission=submission, actor=actor,
           error=step.error)


def _write(step, *, action, study, worker, submission, actor, error):
    log_calls(step.calls, action=action, study=study, worker=worker, submission=submission,
              amount=step.amount, actor=actor, ok=not error, request=step.request,
              response=step.response, error=error)


def log_calls(made, *, request=None, response=None, **row):
    """A row holding the platform calls `made` (see mturk.calls.collect), each with its request and
    answer or error; sent when any of them reached the platform."""
    request, response = dict(request or {}), dict(response or {})
    if made:
        request["calls"] = [call.as_request() for call in made]
        response["calls"] = [call.as_answer() for call in made]
    return log(request=request, response=response, sent=any(call.sent for call in made), **row)


def jsonable(value):
    return json.loads(json.dumps(value, default=str))
