"""The one order in which crowd work takes its row locks.

    the worker, the instance, its reference, the unit, the assignment

A parent before what it holds; of one kind, ascending ids. Two transactions that lock in one
order queue behind each other; two that lock in two orders can each hold what the other waits
for, and PostgreSQL answers one of them `deadlock detected` (issue 38: an in-time caption submit
took the assignment, the instance, the unit; a late one the assignment, the unit, the instance).

Why this order and not another: an item has several units (caption rounds, a surplus unit, the
verification units of its instance), and deciding it closes or makes some of them, so the item
comes before any unit; and every submit knows its item before it knows whether its lease still
holds a slot, which is counted under the unit's lock. A verification submit locks the reference's
instance too, because deciding the reference changes the instance, and a rejected instruction or
caption changes the instance's references and units from the instance down.

Who takes what:
- a worker's own lease requests take the worker first (`queue.locked_for_leasing`), then a unit;
  a submit takes no worker lock (a second tab's submit must not wait for the first tab's lease);
- every submit takes its locks in `lock_assignment_for_submission` (called once, by
  `answers.submit_answer`), and may then lock more of the item's units, which come after the item;
- renewing a lapsed lease or keeping one alive takes the unit, then the assignment (`lock_lease`);
- review takes every item, then every unit, then every assignment of its batch (`lock_for_review`).
Battles are never locked: a judgement's insert only takes a key-share lock on its battle.
"""

from django.utils import timezone

from annotation.crowdwork.stopping import locked_unit
from annotation.exceptions import AnnotationError
from annotation.models import Assignment, Instance, Reference, Stage, WorkUnit

# Refused, not stored as an answer beyond what the unit asked: a decided unit is paid for what
# decided it. The page keeps what was typed and shows this beside it.
DECIDED_MESSAGE = ("This task got all the answers it needs while you were working on it (the others' "
                   "answers decided it), so yours was not saved. What you entered is still on this page; "
                   "please ask for your next task.")

# What a stage's submit reads of its unit's battle, fetched with the unit's lock.
_SUBMIT_RELATIONS = {
    Stage.PAIRWISE: ("battle__tournament", "battle__instance", "battle__response_a", "battle__response_b"),
}


def lock_item(*, stage, instance_id, reference_id):
    """Lock what an answer of `stage` is about, in the order: (instance, reference), each None
    where the stage has none to lock."""
    instance = reference = None
    if stage in (Stage.CAPTION, Stage.VERIFICATION) and instance_id is not None:
        instance = Instance.objects.select_for_update().get(pk=instance_id)
    if stage == Stage.VERIFICATION and reference_id is not None:
        reference = Reference.objects.select_for_update().get(pk=reference_id)
    return instance, reference


def lock_assignment_for_submission(*, assignment_id, worker, stage):
    """Lock what a submission of an assignment changes, in the order, so it is stored once; and say
    whether it already was. Returns (assignment, already_submitted); the assignment's `unit` is
    locked, and so are its `instance` and `reference` where the stage answers about them.
    Must run inside a transaction."""
    # Which unit and item: they never change, so they are read before anything is locked.
    seen = Assignment.objects.filter(pk=assignment_id).values(
        "worker_id", "unit_id", "unit__stage", "unit__instance_id", "unit__reference_id").first()
    if seen is None:
        raise AnnotationError("This task is not known; please ask for a new one.")
    if seen["worker_id"] != worker.pk:
        raise AnnotationError("This task was given to someone else.")
    if seen["unit__stage"] != stage:
        raise AnnotationError("This answer does not belong to this kind of task.")
    instance, reference = lock_item(stage=stage, instance_id=seen["unit__instance_id"],
                                    reference_id=seen["unit__reference_id"])
    unit = (WorkUnit.objects.select_for_update(of=("self",)).select_related(*_SUBMIT_RELATIONS.get(stage, ()))
            .get(pk=seen["unit_id"]))
    if instance is not None:
        unit.instance = instance
    if reference is not None:
        unit.reference = reference
    assignment = Assignment.objects.select_for_update().get(pk=assignment_id)
    assignment.unit = unit
    if assignment.status == Assignment.Status.SUBMITTED:
        return assignment, True
    if assignment.status == Assignment.Status.RETURNED:
        raise AnnotationError("You returned this task; please ask for a new one.")
    if unit.status == WorkUnit.Status.DONE:
        raise AnnotationError(DECIDED_MESSAGE)
    if unit.status != WorkUnit.Status.OPEN:
        raise AnnotationError("This task has been closed; please ask for a new one.")
    now = timezone.now()
    if assignment.lease_expires_at <= now:
        # A late submission is still welcome while its slot has not gone to somebody else.
        others = unit.assignments.holding_a_slot(now).exclude(pk=assignment.pk).count()
        if others >= unit.overlap:
            raise AnnotationError(
                "Your time for this task ran out and it went to someone else. "
                "Your text is still on this page; please ask for a new task."
            )
    return assignment, False


def lock_lease(assignment_id, **filters):
    """The lease's unit, then the lease, locked in the order; the lease (its `unit` the locked one),
    or None when no assignment of that id matches `filters`."""
    unit_id = Assignment.objects.filter(pk=assignment_id, **filters).values_list("unit_id", flat=True).first()
    if unit_id is None:
        return None
    unit = WorkUnit.objects.select_for_update().get(pk=unit_id)
    lease = Assignment.objects.select_for_update().filter(pk=assignment_id, **filters).first()
    if lease is not None:
        lease.unit = unit
    return lease


def lock_for_review(assignment_ids):
    """Lock, in the order, what reviewing these assignments may change: the items their answers
    are about (an instruction's the instance it made), their units, then the assignments
    themselves, which the caller locks last."""
    rows = list(Assignment.objects.filter(pk__in=assignment_ids).values_list(
        "unit_id", "unit__stage", "unit__instance_id", "unit__reference_id", "instruction_submission__instance_id"))
    instances, references = set(), set()
    for _, stage, instance_id, reference_id, made in rows:
        if stage in (Stage.CAPTION, Stage.VERIFICATION) and instance_id is not None:
            instances.add(instance_id)
        if stage == Stage.VERIFICATION and reference_id is not None:
            references.add(reference_id)
        if stage == Stage.INSTRUCTION_GENERATION and made is not None:
            instances.add(made)
    # Each kind in one statement, ordered, so two reviews of overlapping batches queue in turn.
    list(Instance.objects.select_for_update().filter(pk__in=instances).order_by("pk").values_list("pk"))
    list(Reference.objects.select_for_update().filter(pk__in=references).order_by("pk").values_list("pk"))
    list(WorkUnit.objects.select_for_update().filter(pk__in={row[0] for row in rows}).order_by("pk")
         .values_list("pk"))


def lock_unit_and_item(unit):
    """Re-read `unit` locked, after its item (a decision asked again: a review, a changed setting).
    Returns the locked unit, its `instance` and `reference` the locked ones where the stage answers
    about them, as a submit's (`lock_assignment_for_submission`)."""
    instance, reference = lock_item(stage=unit.stage, instance_id=unit.instance_id, reference_id=unit.reference_id)
    unit = locked_unit(pk=unit.pk, stage=unit.stage)
    if instance is not None:
        unit.instance = instance
    if reference is not None:
        unit.reference = reference
    return unit
