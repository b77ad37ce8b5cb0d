"""What researchers do to their webhook endpoints beyond a form's save."""

from auditlog.models import LogEntry
from django.db import transaction

from annotation import teams
from webhooks.models import Endpoint, new_secret

# What an endpoint may be about, and which of those rows each user may choose: the API's and the
# admin's choices alike.
SCOPES = {"family": "group", "tournament": "group", "study": "family__group"}


def choosable(model, user, *, via):
    """The families, tournaments or studies `user` may point an endpoint at: those they change."""
    return teams.changeable(model.objects.all(), user, via=via)


def scope_problem(*, user, family, tournament, study):
    """Why `user` may not save an endpoint about these, or None (Endpoint.clean says that one
    scope at most is chosen). One about everything gets events about no-group families and every
    snapshot: it is for staff outside research groups."""
    if family is None and tournament is None and study is None and not teams.may_change(user, None):
        return ("Choose one of your group's families, tournaments or studies: events about everything "
                "are for staff outside research groups.")
    return None


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
