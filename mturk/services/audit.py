"""Who may pay, and the audit log every payment action writes (who, when, how much, what the
platform answered)."""

import json
import logging

from annotation.models import Worker
from mturk.exceptions import PlatformError
from mturk.models import AuditLog

logger = logging.getLogger(__name__)


PAY_PERMISSION = "mturk.pay_workers"


def require_researcher(actor):
    if actor is None or not actor.is_active or not actor.is_staff or not actor.has_perm(PAY_PERMISSION):
        raise PlatformError("Only researchers allowed to pay workers can do this.")


def log(*, action, study=None, worker=None, submission=None, amount=None, actor=None, ok=True,
        request=None, response=None, error=""):
    platform = study.platform if study else (worker.platform if worker else Worker.Platform.LOCAL)
    return AuditLog.objects.create(
        action=action, platform=platform, study=study, worker=worker, submission=submission,
        amount_usd=amount, actor=actor, ok=ok, request=jsonable(request or {}),
        response=jsonable(response or {}), error=error,
    )


def jsonable(value):
    return json.loads(json.dumps(value, default=str))
