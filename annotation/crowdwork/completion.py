"""When a family's stage is complete, and when its references are ready: the events researchers
are told of (crowdbench/events.py), checked where a unit closes or a reference is stored.

Each check runs under a transaction-scoped advisory lock of its family and stage: without it, the
last two units of a stage closing in two transactions at once would each see the other still open,
and nobody would be told.
"""

import zlib

from django.db import connection, transaction
from django.db.models import Count

from annotation.crowdwork.stages import owed_units
from annotation.models import Instance, InstructionFamily, Reference, StageConfig, WorkUnit
from crowdbench.events import emit


def _serialised(kind, family_id):
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [zlib.crc32(kind.encode()) - 2**31, family_id])


def stage_is_complete(*, family, stage):
    """A launched stage with units done, none open and none owed."""
    units = WorkUnit.objects.filter(family=family, stage=stage)
    return (StageConfig.objects.filter(family=family, stage=stage, launched_at__isnull=False).exists()
            and not units.filter(status=WorkUnit.Status.OPEN).exists()
            and units.filter(status=WorkUnit.Status.DONE).exists()
            and not owed_units(family=family, stage=stage))


def announce_if_stage_complete(*, unit):
    """Once `unit` has closed, emit `stage.completed` if its stage has nothing left to ask. A stage
    that opens again (new instances, a rejection) and completes again is a new event: the key
    counts its units done."""
    if unit.status != WorkUnit.Status.DONE:
        return False
    family_id, stage = unit.family_id, unit.stage
    with transaction.atomic():
        _serialised(f"stage-complete:{stage}", family_id)
        family = InstructionFamily.objects.get(pk=family_id)
        if not stage_is_complete(family=family, stage=stage):
            return False
        done = WorkUnit.objects.filter(family=family, stage=stage, status=WorkUnit.Status.DONE).count()
        instances = family.instances.values("status").order_by().annotate(n=Count("pk"))
        emit(event="stage.completed", scope=family, key=f"{family_id}:{stage}:{done}",
             payload={"family": family_id, "stage": stage, "units_done": done,
                      "instances": {row["status"]: row["n"] for row in instances}})
        return True


def announce_if_references_ready(*, family_id):
    """Emit `references.ready` once no instance of the family waits for a reference: every caption
    has its candidate reference and verification can ask about them all."""
    with transaction.atomic():
        _serialised("references-ready", family_id)
        family = InstructionFamily.objects.get(pk=family_id)
        if family.instances.filter(status=Instance.Status.AWAITING_REFERENCE).exists():
            return False
        references = Reference.objects.filter(instance__family=family)
        count = references.count()
        emit(event="references.ready", scope=family, key=f"{family_id}:{count}",
             payload={"family": family_id, "references": count,
                      "awaiting_verification": references.filter(verdict=Reference.Verdict.PENDING).count()})
        return True
