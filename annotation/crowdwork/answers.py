"""A crowd answer's way in, the same for every stage: the submit locks what it changes in the lock
order, stores the answer once, marks its assignment submitted, closes the unit once its answers
reach what it asks, settles what the answers decide and announces a stage that has nothing left to
ask. What a stage stores, and what its answers decide, is the stage's own (its `StageAnswers`, in
collection/ and preferences/); the order of the steps is written here once.

`settle_unit` is the same decision asked again outside a submit: a review, a changed setting.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotation.crowdwork.completion import announce_if_stage_complete
from annotation.crowdwork.lock_order import lock_assignment_for_submission, lock_unit_and_item
from annotation.crowdwork.stopping import close_if_answered
from annotation.exceptions import AnnotationError
from annotation.models import Assignment


def _decides_nothing(unit, closed):
    return None


@dataclass(frozen=True)
class StageAnswers:
    """What a stage's answers are to a submit: where an assignment's stored answer is found, and
    what the stage's answers decide once one is in."""

    stage: str
    stored: str
    """The stored answer as seen from its assignment: a relation, or a dotted path of them."""
    author: str
    """The stored answer's field naming whose answer it is."""
    settle: Callable = _decides_nothing
    """(unit, closed) -> what the unit's counted answers decide, or None; `unit` is locked with its
    item (`instance`, `reference`) in the lock order, and `closed` says the unit has just closed."""

    def stored_for(self, assignment):
        answer = assignment
        for relation in self.stored.split("."):
            answer = getattr(answer, relation, None)
            if answer is None:
                return None
        return answer


def stored_answer_for(worker, answer, *, author_id):
    """The answer already stored for an assignment submitted again, returned to its author only.

    A second submit of the same assignment (a double click, a resent form) is answered with what
    was stored; anybody else is told nothing about it.
    """
    if answer is None or author_id != worker.pk:
        raise AnnotationError("This task was given to someone else.")
    return answer


def mark_submitted(assignment, *, active_seconds=None):
    """Record the submission and close the unit once it has all the answers it asks now
    (`close_if_answered`). Returns True if closed. The assignment's unit was locked, in the lock
    order, by `lock_assignment_for_submission`."""
    assignment.status = Assignment.Status.SUBMITTED
    assignment.submitted_at = timezone.now()
    if active_seconds is not None:
        assignment.active_seconds = max(0.0, float(active_seconds))
    assignment.save(update_fields=["status", "submitted_at", "active_seconds"])
    return close_if_answered(assignment.unit)


def submit_answer(*, answers, assignment_id, worker, store, active_seconds=None):
    """Submit a worker's answer of `answers.stage` in one transaction: `store(assignment)` stores
    it (the assignment and its unit locked, the unit's item attached) and returns it, or raises
    AnnotationError to refuse it. Submitting the same assignment again returns the answer stored."""
    with transaction.atomic():
        assignment, already = lock_assignment_for_submission(
            assignment_id=assignment_id, worker=worker, stage=answers.stage
        )
        if already:
            answer = answers.stored_for(assignment)
            return stored_answer_for(worker, answer, author_id=answer and getattr(answer, answers.author))
        answer = store(assignment)
        closed = mark_submitted(assignment, active_seconds=active_seconds)
        answers.settle(assignment.unit, closed)
        announce_if_stage_complete(unit=assignment.unit)
    return answer


def settle_unit(unit, answers):
    """Close a unit that has all the answers it asks now (under ask until decided, once they
    decide), and decide what it completes, as its stage's `answers` say. Returns (closed, decided)."""
    unit = lock_unit_and_item(unit)
    closed = close_if_answered(unit)
    decided = answers.settle(unit, closed)
    if closed:
        announce_if_stage_complete(unit=unit)
    return closed, decided is not None
