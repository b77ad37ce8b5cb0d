"""What researchers do to their webhook endpoints beyond a form's save."""

from auditlog.models import LogEntry
from django.db import transaction

from webhooks.models import Endpoint, new_secret


def rotate_secret(*, endpoint, actor):
    """Give `endpoint` a new signing secret and return it: the only moment it is shown (deliveries
    already queued are signed with it when they are sent). The audit trail says that it changed,
    never what it is."""
    with transaction.atomic():
        secret = new_secret()
        Endpoint.objects.filter(pk=endpoint.pk).update(secret=secret)
        LogEntry.objects.log_create(endpoint, action=LogEntry.Action.UPDATE, actor=actor,
                                    changes={"secret": ["(hidden)", "(rotated)"]})
    endpoint.secret = secret
    return secret
