"""Launching a family's stage and making its work units (paper §2.1, Fig. 3): every stage's units are made here.

What a stage owes and what it has made have one definition (`owed_units`): the units its items
need, keyed by facts that do not change while they are worked on, less the keys already made.
The sweep asks it, the job that makes units makes exactly it, and a new instance, reference or
battle opens its unit through it, so no path can make a unit that exists.
"""

import logging
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import CharField, Count, Exists, F, OuterRef, ProtectedError, Q, Subquery, Sum, Value
from django.db.models.functions import Cast, Concat, Greatest
from django.utils import timezone

from annotation.crowdwork.stopping import asks_now, battle_rule, first_ask, locked_unit, verification_stopping
from annotation.exceptions import AnnotationError
from annotation.models import (
    Assignment,
    Battle,
    Instance,
    InstructionFamily,
    Reference,
    Stage,
    StageConfig,
    WorkState,
    WorkUnit,
)
from crowdbench.events import emit
from crowdbench.jobs import enqueue

logger = logging.getLogger(__name__)


# --- unit identities: one place for every stage -------------------------------------------------
# As SQL, so the sweep finds owed units in the database however many items a stage has.


def _key(*parts):
    return Concat(*(Cast(part, CharField()) if isinstance(part, str) else part for part in parts),
                  output_field=CharField())


def slot_key(family_id, number):
    """The `number`th instruction-generation task of a family (one new instance each)."""
    return f"family-{family_id}-slot-{number}"


# The caption task of an instance's current caption round.
CAPTION_KEY = _key(Value("instance-"), "pk", Value("-round-"), "caption_round")
REFERENCE_KEY = _key(Value("reference-"), "pk")
BATTLE_KEY = _key(Value("battle-"), "pk")


@dataclass(frozen=True)
class UnitSpec:
    """A unit a stage needs: its identity and what it is about."""

    key: str
    family_id: int
    overlap: int
    instance: Instance | None = None
    reference: Reference | None = None
    battle: Battle | None = None


# --- launching ----------------------------------------------------------------------------------


def stage_config(*, family, stage):
    config, _ = StageConfig.objects.get_or_create(family=family, stage=stage)
    return config


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
        try:
            config.clean()
        except ValidationError as error:
            raise AnnotationError(" ".join(error.messages)) from None
        config.launched_at = config.launched_at or timezone.now()
        config.save()
        enqueue("tasks.create_work_units", family.pk, stage)
        emit(event="stage.launched", scope=family, key=f"{family.pk}:{stage}",
             payload={"family": family.pk, "stage": stage, "overlap": config.overlap})
    return config


# --- what a stage owes ------------------------------------------------------------------------


def _slots_owed(family):
    """The instruction-generation tasks a family still needs: its target, less its instances that
    are not discarded and the answers its open tasks may still bring. Numbered on from the slots
    already made, so makers taking turns (`create_work_units`) never name a slot twice."""
    units = family.work_units.filter(stage=Stage.INSTRUCTION_GENERATION)
    made = units.count()
    submitted = Count("assignments", filter=Q(assignments__status=Assignment.Status.SUBMITTED)
                      & ~Q(assignments__work_state=WorkState.REJECTED))
    # Room first, instances second: a submit that commits between the two counts twice (one task
    # too few, made by the next sweep), never not at all (one task too many, paid for).
    open_room = (
        units.filter(status=WorkUnit.Status.OPEN).annotate(submitted=submitted)
        .aggregate(room=Sum(Greatest(F("overlap") - F("submitted"), 0)))["room"] or 0
    )
    live = family.instances.exclude(status=Instance.Status.DISCARDED).count()
    missing = max(0, family.target_instances - live - open_room)
    return [UnitSpec(key=slot_key(family.pk, made + number), family_id=family.pk, overlap=1)
            for number in range(1, missing + 1)]


def _not_made(items, stage, key):
    """`items` annotated with their unit's key, less those whose unit exists."""
    made = WorkUnit.objects.filter(stage=stage, key=OuterRef("unit_key"))
    return items.annotate(unit_key=key).exclude(Exists(made))


def first_overlap_of_verification(config):
    """What a new verification unit asks: the overlap, or under ask until decided the fewest
    answers that could decide."""
    return first_ask((verification_stopping(config), config.overlap)) if config.adaptive else config.overlap


def first_overlap_of_battle(tournament):
    """What a new battle unit asks: the tournament's judgements per pair, or under ask until decided
    the fewest judgements that could pass its threshold."""
    if not tournament.adaptive:
        return tournament.judgements_per_pair
    return first_ask((battle_rule(tournament), tournament.judgements_per_pair))


def _owed_of_items(family, stage, config, *, instance=None, reference=None):
    """The units the stage's items need and lack (of one item when one is named): every stage but
    instruction generation, whose tasks have no item until they are answered."""
    if stage == Stage.CAPTION:
        instances = family.instances.filter(status=Instance.Status.AWAITING_CAPTION)
        if instance is not None:
            instances = instances.filter(pk=instance.pk)
        return [UnitSpec(key=instance.unit_key, family_id=family.pk, overlap=config.overlap, instance=instance)
                for instance in _not_made(instances, stage, CAPTION_KEY)]
    if stage == Stage.VERIFICATION:
        references = Reference.objects.filter(
            instance__family=family,
            instance__status=Instance.Status.AWAITING_VERIFICATION,
            verdict=Reference.Verdict.PENDING,
        )
        if reference is not None:
            references = references.filter(pk=reference.pk)
        overlap = first_overlap_of_verification(config)
        return [UnitSpec(key=reference.unit_key, family_id=family.pk, overlap=overlap,
                         instance=reference.instance, reference=reference)
                for reference in _not_made(references, stage, REFERENCE_KEY).select_related("instance")]
    # Battles are sampled per tournament, and each asks the judgements its tournament says.
    battles = Battle.objects.filter(instance__family=family, tournament__launched_at__isnull=False)
    return [UnitSpec(key=battle.unit_key, family_id=family.pk, overlap=first_overlap_of_battle(battle.tournament),
                     instance=battle.instance, battle=battle)
            for battle in _not_made(battles, stage, BATTLE_KEY).select_related("instance", "tournament")]


def owed_units(*, family, stage, instance=None, reference=None):
    """The units a launched stage needs and has not made (of one item when one is named): the one
    definition of owed work."""
    config = StageConfig.objects.filter(family=family, stage=stage, launched_at__isnull=False).first()
    if config is None:
        return []
    if stage == Stage.INSTRUCTION_GENERATION:
        return _slots_owed(family)
    return _owed_of_items(family, stage, config, instance=instance, reference=reference)


def units_owed(*, family, stage):
    """True when a launched stage lacks units it needs (its creation job was lost or never ran)."""
    return bool(owed_units(family=family, stage=stage))


def _make_units(*, stage, specs):
    """Make the work units of `specs` (UnitSpecs of one stage). A key already made is left as it is,
    so making the same units again makes nothing twice. Returns how many were new."""
    units = [WorkUnit(stage=stage, key=spec.key, family_id=spec.family_id, instance=spec.instance,
                      reference=spec.reference, battle=spec.battle, overlap=spec.overlap)
             for spec in specs]
    keys = [unit.key for unit in units]
    before = WorkUnit.objects.filter(stage=stage, key__in=keys).count()
    WorkUnit.objects.bulk_create(units, ignore_conflicts=True)
    return WorkUnit.objects.filter(stage=stage, key__in=keys).count() - before


def create_work_units(*, family, stage, instance=None, reference=None):
    """Make what a launched stage owes (for one item when one is named); running it again, at any
    moment, makes nothing twice. Returns how many units were made."""
    with transaction.atomic():
        if stage == Stage.INSTRUCTION_GENERATION:
            # Makers of a family's slots take turns: slots are numbered on from those already made,
            # which a maker must see committed before it counts. Other stages' keys name their item.
            StageConfig.objects.select_for_update().filter(family=family, stage=stage).first()
        return _make_units(stage=stage, specs=owed_units(family=family, stage=stage, instance=instance,
                                                               reference=reference))


def close_units_no_longer_owed(*, stage, **item):
    """Close the open units of `stage` about an item (instance=..., reference=...) that has moved on
    (its caption was chosen, its instance was decided): nobody is asked for work no longer used.
    Answers already in are kept. Returns how many closed."""
    return WorkUnit.objects.filter(stage=stage, status=WorkUnit.Status.OPEN, **item) \
        .update(status=WorkUnit.Status.CANCELLED)


def unbegin_caption_round(instance):
    """Take back the caption round `instance` is in, when nobody was asked for it: no lease, no
    caption, no listing on a crowd platform. Its unit goes as if it had never been made, so the
    instance's units stay one per round it is in (the key names the round), and beginning the round
    again makes its unit anew. `instance` is locked by the caller. Returns False, changing nothing,
    when the round has begun."""
    if instance.captions.filter(round=instance.caption_round).exists():
        return False
    current = Instance.objects.filter(pk=instance.pk).annotate(unit_key=CAPTION_KEY).values("unit_key")
    # Locked before it is looked at, so a lease taking it now either came first (and is seen
    # below) or finds it gone.
    units = list(WorkUnit.objects.select_for_update().filter(stage=Stage.CAPTION, key=Subquery(current)))
    if Assignment.objects.filter(unit__in=units).exists():
        return False
    try:
        for unit in units:
            unit.delete()
    except ProtectedError:
        # A crowd platform lists it (a HIT): the round was offered, so it stands.
        return False
    return True


def unit_still_needed(unit):
    """Whether `unit`'s item still needs the unit's answers: the instance is in the caption round
    the unit was made for, the reference still waits for its decision, the battle's tournament is
    launched (an instruction task always is)."""
    if unit.surplus:
        return False
    if unit.stage == Stage.CAPTION:
        return Instance.objects.filter(pk=unit.instance_id, status=Instance.Status.AWAITING_CAPTION) \
            .annotate(unit_key=CAPTION_KEY).filter(unit_key=unit.key).exists()
    if unit.stage == Stage.VERIFICATION:
        return Reference.objects.filter(pk=unit.reference_id, verdict=Reference.Verdict.PENDING,
                                        instance__status=Instance.Status.AWAITING_VERIFICATION).exists()
    if unit.stage == Stage.PAIRWISE:
        return Battle.objects.filter(pk=unit.battle_id, tournament__launched_at__isnull=False).exists()
    return True


def reopen_if_needed(unit, *, ask_again=False):
    """Open `unit` again when its item still needs more answers than it holds, so the queue asks
    another worker. Under ask until decided it asks what its answers in need now (they may decide
    on their own). A unit whose answers fill what it asked is asked again only when `ask_again`:
    an answer was taken out (a rejection: those left are not the set that closed it, however many
    a re-accepted one makes them), or its stopping rule's settings changed. Otherwise not: a weighed
    rule's accuracies move with every gold answer and refit, and asking again on them would buy an
    answer each time anything asks. Returns True when it opened."""
    unit = locked_unit(pk=unit.pk, stage=unit.stage)
    if unit.status == WorkUnit.Status.OPEN:
        return False
    answered = unit.assignments.answered().count()
    if answered >= unit.overlap and not ask_again:
        return False
    asked = asks_now(unit)
    if answered >= asked or not unit_still_needed(unit):
        return False
    unit.status, unit.overlap = WorkUnit.Status.OPEN, asked
    unit.save(update_fields=["status", "overlap"])
    return True


def room_for_another_instance(family):
    """Whether the family's target has room for one more instance (a discarded one coming back)
    beside its live instances and the open instruction tasks somebody holds, which may each still
    bring one; open tasks nobody holds are closed to make room (`trim_open_slots`)."""
    held = family.work_units.filter(stage=Stage.INSTRUCTION_GENERATION, status=WorkUnit.Status.OPEN).filter(
        Exists(Assignment.objects.holding_a_slot().filter(unit=OuterRef("pk")))).count()
    live = family.instances.exclude(status=Instance.Status.DISCARDED).count()
    return live + held < family.target_instances


def trim_open_slots(*, family):
    """Close open instruction-generation tasks nobody holds or answered, newest first, while the
    family's instances and its open tasks' room exceed its target (an instance came back from a
    discard, say). Returns how many closed."""
    with transaction.atomic():
        StageConfig.objects.select_for_update().filter(family=family, stage=Stage.INSTRUCTION_GENERATION).first()
        units = family.work_units.filter(stage=Stage.INSTRUCTION_GENERATION, status=WorkUnit.Status.OPEN)
        live = family.instances.exclude(status=Instance.Status.DISCARDED).count()
        excess = live + units.count() - family.target_instances
        untouched = units.exclude(Exists(Assignment.objects.holding_a_slot().filter(unit=OuterRef("pk"))))
        closing = list(untouched.order_by("-pk").values_list("pk", flat=True)[:max(0, excess)])
        return WorkUnit.objects.filter(pk__in=closing).update(status=WorkUnit.Status.CANCELLED)
