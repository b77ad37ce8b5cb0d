"""Launching a family's stage and making its work units (paper §2.1, Fig. 3): every stage's units are made here."""

import logging

from django.db import transaction
from django.utils import timezone

from annotation.exceptions import AnnotationError
from annotation.models import (
    Instance,
    InstructionFamily,
    Reference,
    Stage,
    StageConfig,
    WorkUnit,
)
from crowdbench.jobs import enqueue

logger = logging.getLogger(__name__)


def stage_config(*, family, stage):
    config, _ = StageConfig.objects.get_or_create(family=family, stage=stage)
    return config


def is_launched(*, family, stage):
    return StageConfig.objects.filter(family=family, stage=stage, launched_at__isnull=False).exists()


def launch_stage(*, family, stage, overlap=None, lease_minutes=None):
    """Open a crowd stage of a family; a background job then creates its work units."""
    if stage == Stage.INSTRUCTION_GENERATION and family.source == InstructionFamily.Source.REFORMATTED:
        raise AnnotationError(
            f"“{family.name}” is reformatted from {family.source_dataset}: its instances come from "
            "a bulk import, not from instruction generation."
        )
    with transaction.atomic():
        config = stage_config(family=family, stage=stage)
        if overlap is not None:
            config.overlap = overlap
        if lease_minutes is not None:
            config.lease_minutes = lease_minutes
        config.launched_at = config.launched_at or timezone.now()
        config.save()
        enqueue("tasks.create_work_units", family.pk, stage)
    return config


def _unit_specs(family, stage):
    """(key, instance, reference) of every unit the stage needs now."""
    if stage == Stage.PAIRWISE:
        # Battles belong to a tournament, which makes their units when it is launched
        # (annotation/preferences/tournaments.py: launch_tournament); a family alone does not say which battles.
        return []
    if stage == Stage.INSTRUCTION_GENERATION:
        made = family.instances.exclude(status=Instance.Status.DISCARDED).count()
        open_slots = family.work_units.filter(stage=stage, status=WorkUnit.Status.OPEN).count()
        start = family.work_units.filter(stage=stage).count()
        missing = max(0, family.target_instances - made - open_slots)
        return [(f"family-{family.pk}-slot-{start + k + 1}", None, None) for k in range(missing)]
    if stage == Stage.CAPTION:
        instances = family.instances.filter(status=Instance.Status.AWAITING_CAPTION)
        return [(caption_key(instance), instance, None) for instance in instances]
    references = Reference.objects.filter(
        instance__family=family,
        instance__status=Instance.Status.AWAITING_VERIFICATION,
        verdict=Reference.Verdict.PENDING,
    ).select_related("instance")
    return [(f"reference-{ref.pk}", ref.instance, ref) for ref in references]


def units_owed(*, family, stage):
    """True when a launched stage lacks units it needs (its creation job was lost or never ran)."""
    if not is_launched(family=family, stage=stage):
        return False
    keys = {key for key, _, _ in _unit_specs(family, stage)}
    return WorkUnit.objects.filter(stage=stage, key__in=keys).count() < len(keys)


def caption_key(instance):
    return f"instance-{instance.pk}-round-{instance.captions.count() + 1}"


def make_work_units(*, stage, overlap, specs):
    """Make the work units of a stage from (key, family id, instance, reference, battle) specs: the
    one place every stage's units are made, the pairwise stage's included. A key already made is
    left as it is, so making the same units again makes nothing twice. Returns how many were new."""
    units = [WorkUnit(stage=stage, key=key, family_id=family_id, instance=instance, reference=reference,
                      battle=battle, overlap=overlap)
             for key, family_id, instance, reference, battle in specs]
    keys = [unit.key for unit in units]
    before = WorkUnit.objects.filter(stage=stage, key__in=keys).count()
    WorkUnit.objects.bulk_create(units, ignore_conflicts=True)
    return WorkUnit.objects.filter(stage=stage, key__in=keys).count() - before


def create_work_units(*, family, stage):
    """Create the units a launched stage needs; running it again creates nothing twice."""
    if not is_launched(family=family, stage=stage):
        return 0
    config = stage_config(family=family, stage=stage)
    return make_work_units(stage=stage, overlap=config.overlap,
                           specs=[(key, family.pk, instance, reference, None)
                                  for key, instance, reference in _unit_specs(family, stage)])


def open_unit_if_launched(*, family, stage, key, instance=None, reference=None):
    """Open the unit a new instance or reference needs at once, when its stage is launched."""
    if is_launched(family=family, stage=stage):
        make_work_units(stage=stage, overlap=stage_config(family=family, stage=stage).overlap,
                        specs=[(key, family.pk, instance, reference, None)])
