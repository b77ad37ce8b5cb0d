"""Events become deliveries: each emitted event is written, in the emitter's transaction, as one
Delivery per endpoint that asked for it and one for the researchers' e-mail where settings name
it; each delivery is queued once the transaction commits (a lost message is sent again by the
outbox sweep, tasks/outbox.py)."""

import logging

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.dispatch import receiver
from django.utils import timezone

from annotation.models import InstructionFamily, Snapshot, Tournament, Worker, WorkUnit
from crowdbench.events import emit, event_emitted
from crowdbench.jobs import enqueue
from mturk.models import CrowdStudy
from mturk.selectors import study_figures
from webhooks.models import Delivery, Endpoint
from webhooks.sending import DELIVER_JOB, email_recipients

logger = logging.getLogger(__name__)

_UNSCOPED = Q(family__isnull=True, tournament__isnull=True, study__isnull=True)


def _reach(scope):
    """The endpoints an event about `scope` goes to: those of the scope, of what it belongs to
    (a study's family; a snapshot's tournaments and the families of its instances), and those
    that asked for everything (the only ones told about a worker, who belongs to no family).

    "Everything" is everything of no research group: such an endpoint belongs to no group, and its
    deliveries are read by staff outside groups, who may not read a group's rows. An event about a
    group's row goes to that group's endpoints alone, whoever's request or job emitted it."""
    everything = _UNSCOPED if _group_of(scope) is None else Q(pk__in=[])
    if isinstance(scope, InstructionFamily):
        return everything | Q(family=scope)
    if isinstance(scope, Tournament):
        return everything | Q(tournament=scope)
    if isinstance(scope, CrowdStudy):
        return everything | Q(study=scope) | (Q(family_id=scope.family_id) if scope.family_id else Q(pk__in=[]))
    if isinstance(scope, Snapshot):
        families = InstructionFamily.objects.filter(instances__pk__in=[int(pk) for pk in scope.instance_digests])
        return everything | Q(tournament__in=scope.tournaments.all()) | Q(family__in=families)
    return everything


def _group_of(scope):
    if isinstance(scope, CrowdStudy):
        return scope.family.group_id if scope.family_id else None
    return getattr(scope, "group_id", None)


def describe(scope):
    """What the event is about, as the body's `scope` says it."""
    if scope is None:
        return None
    kind = {InstructionFamily: "family", Tournament: "tournament", CrowdStudy: "study",
            Snapshot: "snapshot", Worker: "worker"}[type(scope)]
    return {"kind": kind, "id": scope.pk, "name": str(scope)}


def body(*, event, event_id, scope, payload):
    return {"id": str(event_id), "type": event, "created_at": timezone.now().isoformat(),
            "scope": describe(scope), "data": payload}


@receiver(event_emitted)
def record_deliveries(sender, *, event, event_id, scope, payload, **kwargs):
    content = body(event=event, event_id=event_id, scope=scope, payload=payload)
    label = content["scope"]["name"] if content["scope"] else ""
    owed = [(endpoint, Delivery.Channel.WEBHOOK)
            for endpoint in Endpoint.objects.filter(_reach(scope), active=True) if event in endpoint.events]
    if event in settings.NOTIFY_EVENTS and email_recipients():
        owed.append((None, Delivery.Channel.EMAIL))
    for endpoint, channel in owed:
        delivery = _record(endpoint=endpoint, channel=channel, event=event, event_id=event_id, scope=label,
                           payload=content)
        if delivery is not None:
            enqueue(DELIVER_JOB, delivery.pk)


def _record(*, endpoint, channel, event, event_id, scope, payload):
    """The new delivery, or None when this consumer already has this event."""
    if Delivery.objects.filter(endpoint=endpoint, event_id=event_id).exists():
        return None
    try:
        with transaction.atomic():
            return Delivery.objects.create(endpoint=endpoint, channel=channel, event=event, event_id=event_id,
                                           scope=scope, payload=payload, next_attempt_at=timezone.now())
    except IntegrityError:
        # Emitted at the same moment by another transaction, which has committed it.
        return None


@receiver(event_emitted)
def studies_complete_with_their_stage(sender, *, event, event_id, scope, payload, **kwargs):
    """A crowd study is complete when the stage it publishes has nothing open or owed: for a study
    of one family, when that family's stage completes; for a study drawing on every family, when
    no family's units of the stage are open."""
    if event != "stage.completed":
        return
    stage = payload["stage"]
    studies = CrowdStudy.objects.filter(stage=stage).filter(Q(family=scope) | Q(family__isnull=True))
    for study in studies:
        if study.family_id is None and WorkUnit.objects.filter(stage=stage, status=WorkUnit.Status.OPEN).exists():
            continue
        # The figures the study's page shows (mturk.selectors), so the event, its e-mail and the
        # page say the same thing.
        emit(event="study.completed", scope=study, key=f"{study.pk}:{event_id}",
             payload={"study": study.pk, "platform": study.platform, "stage": stage,
                      **study_figures(study).payload()})
