"""What every item of a family waits for (DESIGN: "every item has a next step"), and the one
re-evaluation that gives it one.

`waits_for` names, per instance, the one thing its next step needs: a researcher to launch its
stage, a crowd task (an open unit of its stage), a candidate reference, a reviewer (an answer to
accept where the stage counts only accepted ones, or a reference a model was held on), the
worker-model job, or nothing because it is decided or discarded. `Waits.NO_NEXT_STEP` is a fault:
nothing anyone or any job will do moves the item, and `manage.py check_benchmark` reports it.

`settle_family` asks every undecided item again what its answers decide and what it still needs,
and makes what is missing: called whenever the facts an item's next step rests on change outside a
submit (a changed stage setting, a raised target, a refit); a review asks it of the units it
touched (annotation/crowdwork/review.py). The workflow page's counts and its "Nothing to do" read `waits_for`.
An instance whose status alone says what it waits for (verified, discarded, awaiting a reference)
is counted, not named (`FamilyWaits.by_status`).
"""

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from django.db import transaction
from django.db.models import Count, Exists, OuterRef

from annotation.collection.verification import counted_votes, votes_complete
from annotation.crowdwork.decisions import settle_again
from annotation.crowdwork.lock_order import lock_unit_and_item
from annotation.crowdwork.stages import CAPTION_KEY, create_work_units, owed_units, reopen_if_needed
from annotation.models import (
    Aggregation,
    Assignment,
    Instance,
    Reference,
    Stage,
    StageConfig,
    WorkState,
    WorkUnit,
)


class Waits(StrEnum):
    LAUNCH = "a researcher to launch its stage"
    TASK = "a crowd task"
    REFERENCE = "a candidate reference"
    REVIEWER = "a reviewer"
    WORKER_MODEL = "the worker-model job"
    DECIDED = "nothing: it is verified"
    DISCARDED = "nothing: it is discarded"
    NO_NEXT_STEP = "nothing, undecided: no next step"


@dataclass(frozen=True)
class FamilyWaits:
    """Each undecided instance's wait, how many instances wait for what their status alone says,
    and what the family's target still asks that no task asks for."""

    instances: dict
    """Instance id -> Waits, of the instances whose wait is more than their status."""
    slots_missing: int = 0
    by_status: Counter = field(default_factory=Counter)
    """Waits -> instances, of those whose status says it (`BY_STATUS`)."""

    def counts(self):
        return Counter(self.instances.values()) + self.by_status

    @property
    def stuck(self):
        return sorted(pk for pk, wait in self.instances.items() if wait == Waits.NO_NEXT_STEP)

    @property
    def crowd_at_work(self):
        return any(wait == Waits.TASK for wait in self.instances.values())


# What an instance of each of these statuses waits for, whatever else is so: counted, not loaded (a
# family at campaign size holds 2,000 instances, most of them verified).
BY_STATUS = {
    Instance.Status.VERIFIED: Waits.DECIDED,
    Instance.Status.DISCARDED: Waits.DISCARDED,
    Instance.Status.AWAITING_REFERENCE: Waits.REFERENCE,
}


def waits_for(family, *, instances_by_status=None):
    """What each of `family`'s instances waits for (see the module's docstring). The workflow page
    passes its kept count of the instances by status (`instances_by_status`, workflow_counts.py),
    which spares counting them again."""
    configs = {config.stage: config for config in StageConfig.objects.filter(family=family)}
    launched = {stage for stage, config in configs.items() if config.launched_at is not None}
    if instances_by_status is None:
        instances_by_status = dict(family.instances.filter(status__in=BY_STATUS).values_list("status")
                                   .annotate(n=Count("pk")).order_by())
    by_status = Counter({wait: instances_by_status.get(status, 0) for status, wait in BY_STATUS.items()})
    waits = {}
    undecided = list(family.instances.exclude(status__in=BY_STATUS).annotate(caption_key=CAPTION_KEY)
                     .order_by("pk").values_list("pk", "status", "caption_key"))
    # The caption units of the instances awaiting a caption only: a campaign's family has thousands
    # of caption units, nearly all of instances long past their caption.
    caption_units = WorkUnit.objects.filter(family=family, stage=Stage.CAPTION, key__in=[
        caption_key for _, status, caption_key in undecided if status == Instance.Status.AWAITING_CAPTION])
    open_caption_keys = set(caption_units.filter(status=WorkUnit.Status.OPEN).values_list("key", flat=True))
    # Answers in that the stage does not count until a reviewer accepts them.
    unreviewed = Assignment.objects.answered().filter(unit=OuterRef("pk"), work_state=WorkState.PROVISIONAL)
    caption_unreviewed = set(caption_units.filter(Exists(unreviewed)).values_list("key", flat=True))
    awaiting_verification = []
    for pk, status, caption_key in undecided:
        if status == Instance.Status.AWAITING_CAPTION:
            if caption_key in open_caption_keys:
                waits[pk] = Waits.TASK
            elif Stage.CAPTION not in launched:
                waits[pk] = Waits.LAUNCH
            elif caption_key in caption_unreviewed and not configs[Stage.CAPTION].counts_provisional:
                waits[pk] = Waits.REVIEWER
            else:
                waits[pk] = Waits.NO_NEXT_STEP
        else:
            awaiting_verification.append(pk)
    if awaiting_verification:
        waits.update(_verification_waits(awaiting_verification, configs.get(Stage.VERIFICATION), launched))
    return FamilyWaits(instances=waits, slots_missing=_slots_missing(family, launched), by_status=+by_status)


def _verification_waits(instance_ids, config, launched):
    """Per instance awaiting verification, what its pending references wait for: the nearest of
    them (a task before a reviewer before the worker-model job)."""
    order = [Waits.TASK, Waits.LAUNCH, Waits.REVIEWER, Waits.WORKER_MODEL, Waits.NO_NEXT_STEP]
    found = {pk: Waits.NO_NEXT_STEP for pk in instance_ids}
    references = (Reference.objects.filter(instance_id__in=instance_ids, verdict=Reference.Verdict.PENDING)
                  .prefetch_related("work_units").order_by("pk"))
    for reference in references:
        wait = _reference_waits(reference, config, launched)
        if order.index(wait) < order.index(found[reference.instance_id]):
            found[reference.instance_id] = wait
    return found


def _reference_waits(reference, config, launched):
    if reference.held_for_review:
        return Waits.REVIEWER
    units = [unit for unit in reference.work_units.all() if unit.stage == Stage.VERIFICATION]
    if any(unit.status == WorkUnit.Status.OPEN for unit in units):
        return Waits.TASK
    if Stage.VERIFICATION not in launched or config is None:
        return Waits.LAUNCH
    votes = counted_votes(reference, config)
    if units and votes_complete(votes, config, units[0]):
        return Waits.WORKER_MODEL if config.aggregation != Aggregation.VOTES else Waits.NO_NEXT_STEP
    if not config.counts_provisional and reference.verifications.filter(
            assignment__work_state=WorkState.PROVISIONAL).exists():
        return Waits.REVIEWER
    return Waits.NO_NEXT_STEP


def _slots_missing(family, launched):
    """How many more instances the family's target asks for than its live instances and its open
    instruction tasks may bring (the tasks instruction generation owes and has not made)."""
    if Stage.INSTRUCTION_GENERATION not in launched:
        return 0
    return len(owed_units(family=family, stage=Stage.INSTRUCTION_GENERATION))


@dataclass
class Settled:
    """What `settle_family` did."""

    units_made: int = 0
    units_reopened: int = 0
    decided: int = 0

    def message(self):
        parts = []
        if self.units_made:
            parts.append(f"{self.units_made} new task(s) made")
        if self.units_reopened:
            parts.append(f"{self.units_reopened} task(s) back in the queue")
        if self.decided:
            parts.append(f"{self.decided} decision(s) made")
        return "; ".join(parts)


def settle_family(family, *, rule_changed_of=None):
    """Give every undecided item of `family` its next step: make the units its launched stages owe
    (a raised target's instruction tasks, say), reopen the units of items whose counted answers no
    longer suffice (on the stage `rule_changed_of`, whose stopping rule's settings changed, asked
    again under the new rule), and decide (or queue for the worker-model job) those whose answers
    now do. Idempotent: run again on the same facts, it does nothing."""
    settled = Settled()
    launched = StageConfig.objects.filter(family=family, launched_at__isnull=False).values_list("stage", flat=True)
    for stage in (Stage.INSTRUCTION_GENERATION, Stage.CAPTION, Stage.VERIFICATION):
        if stage in launched:
            settled.units_made += create_work_units(family=family, stage=stage)
    in_flight = (
        WorkUnit.objects.filter(family=family, stage=Stage.VERIFICATION, surplus=False,
                                reference__verdict=Reference.Verdict.PENDING,
                                reference__held_for_review="",
                                instance__status=Instance.Status.AWAITING_VERIFICATION)
        | WorkUnit.objects.filter(family=family, stage=Stage.CAPTION, surplus=False,
                                  instance__status=Instance.Status.AWAITING_CAPTION)
    )
    for unit in in_flight.order_by("pk"):
        with transaction.atomic():
            unit = lock_unit_and_item(unit)
            settled.units_reopened += reopen_if_needed(unit, ask_again=unit.stage == rule_changed_of)
            settled.decided += settle_again(unit)[1]
    return settled

