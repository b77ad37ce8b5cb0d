"""What an annotator is shown next in a stage: one decision, with the rule that made it.

The annotator's page asks `next_step` and renders its answer (in the manner of Label Studio's
`get_next_task`, which returns the task and a `queue_info` naming the rule that chose it). The
rules, in the order they are asked:

1. a worker the queue may not give the stage's units to is refused (blocked, or paused for low
   accuracy on gold items: a lease still held goes back to the pool at once), or, not qualified
   yet, sent to the stage's qualification test (paper §2.2);
2. a platform worker holding no lease in the stage is now and then shown a live gold item, while
   the stage has a unit for them, so that their accuracy stays current (`live_gold_item`: when,
   and which; the answer and the accuracy it keeps are annotation/workforce/qualifications.py's);
3. the lease they hold (a reload resumes), else a new one;
4. nothing left for them.

A study on a platform adds its completion code around these (mturk/participants.py).
"""

import random
from dataclasses import dataclass, replace
from enum import StrEnum

from django.db import transaction

from annotation.crowdwork.leases import LeaseTerms, lease_terms, return_held
from annotation.crowdwork.queue import holds_a_lease, lease_unit, locked_for_leasing, next_assignment, units_open_to
from annotation.crowdwork.standing import local_worker, local_workers, may_work
from annotation.models import (
    Assignment,
    GoldAnswer,
    GoldItem,
    StageQualification,
    Worker,
    WorkerBlock,
    WorkerQualification,
)

BLOCKED_MESSAGE = ("Your account cannot take these tasks. If you think this is a mistake, please message "
                   "the researchers through your platform.")


class Step(StrEnum):
    LEASE = "lease"
    GOLD = "gold"
    QUALIFICATION_TEST = "qualification_test"
    BLOCKED = "blocked"
    PAUSED = "paused"
    NOTHING = "nothing"
    # A study's own (mturk/participants.py): the completion code, earned now or shown again.
    COMPLETION = "completion"


@dataclass(frozen=True)
class NextStep:
    kind: Step
    reason: str
    """Which rule chose this step; for a refusal (BLOCKED, PAUSED), why, in words for the worker."""
    assignment: Assignment | None = None
    gold_item: dict | None = None
    """The live gold item to show (`live_gold_item`), for GOLD."""
    again: bool = False
    """COMPLETION: the code was shown in this platform session before."""
    may_finish: bool = False
    """PAUSED in a study: the participant has done a task, so may stop and take the code."""
    worker: Worker | None = None
    """Whom the step is for: the way in that found the worker itself says so."""
    lease: LeaseTerms | None = None
    """LEASE: the lease's terms, which its page counts down and renews."""
    done: int = 0
    """In a study: how many of its tasks the participant has submitted, which their page shows."""
    completion: object = None
    """COMPLETION: the study's code and where to enter it (mturk.links.Completion)."""


def next_step(*, worker, stage, family=None, unit=None, platform_assignment_id="", platform_listing_id="",
              rebind=False, given_back_too=True, shows_gold=False):
    """What `worker`, whose identity the caller has proven, is shown next in `stage`.

    `family` narrows the queue to one family; `unit` is one given unit instead (an MTurk HIT names
    its unit), leased under `lease_unit`'s rules, whose AnnotationError (ClaimConflict for a claim
    that disagrees with the bound pair) is raised to the caller. Platform ids are stored with the
    lease. `given_back_too=False` keeps a unit the worker just gave back from coming straight back.
    `shows_gold`: the stage's page can show a live gold item.
    """
    refused = _refusal(worker, stage)
    if refused is not None:
        return replace(refused, worker=worker)
    if shows_gold and worker.platform not in Worker.IN_HOUSE:
        # In-house annotators are trained in person and hold no qualification to keep current.
        gold = _live_gold(worker=worker, stage=stage, family=family, unit=unit)
        if gold is not None:
            return NextStep(Step.GOLD, "a live gold item, now and then, keeps the worker's accuracy current",
                            gold_item=gold, worker=worker)
    if unit is not None:
        assignment = lease_unit(worker=worker, unit=unit, platform_assignment_id=platform_assignment_id,
                                platform_listing_id=platform_listing_id, rebind=rebind)
    else:
        assignment = next_assignment(worker=worker, stage=stage, family=family,
                                     platform_assignment_id=platform_assignment_id,
                                     platform_listing_id=platform_listing_id, given_back_too=given_back_too)
    if assignment is None:
        return NextStep(Step.NOTHING, "no unit of the stage is open to this worker now", worker=worker)
    return NextStep(Step.LEASE, "the lease the worker holds, or the next unit with room", assignment=assignment,
                    worker=worker, lease=lease_terms(assignment))


def next_step_of_annotator(*, user, stage, family=None, given_back_too=True, shows_gold=False):
    """`next_step` for the in-house annotator signed in as `user`: their worker (made at their first
    task) is fetched with its standing and the lock its lease needs, in the decision's transaction."""
    with transaction.atomic():
        worker = locked_for_leasing(local_workers(user, stage=stage))
        if worker is None:  # their first task
            worker = local_worker(user, stage=stage)
        return next_step(worker=worker, stage=stage, family=family, given_back_too=given_back_too,
                         shows_gold=shows_gold)


def _refusal(worker, stage):
    """Why the queue may not give this worker the stage's units, or None when it may."""
    if may_work(worker, stage):
        return None
    blocked = (worker.blocked if getattr(worker, "standing_stage", None) == stage
               else WorkerBlock.objects.filter(worker=worker, active=True).exists())
    if blocked:
        return NextStep(Step.BLOCKED, BLOCKED_MESSAGE)
    granted = (WorkerQualification.objects.select_related("qualification")
               .filter(qualification__stage=stage, worker=worker).first())
    if granted is None:
        return NextStep(Step.QUALIFICATION_TEST, "the stage has a qualification test the worker has not passed")
    # Paused for low accuracy on gold items: a lease still held goes back to the pool at once.
    return_held(worker=worker, stage=stage)
    bar, accuracy = granted.qualification.live_accuracy_bar, granted.live_accuracy
    return NextStep(Step.PAUSED, (
        "Some tasks are check questions whose answer is known. "
        + (f"Of your recent ones {accuracy:.0%} were right, below the {bar:.0%} needed, "
           if accuracy is not None else "Too few of your recent ones were right, ")
        + "so these tasks are paused for you. Everything you submitted is saved. A researcher "
        "will look at your answers and get in touch through your platform."
    ))


def _live_gold(*, worker, stage, family, unit):
    """A gold item to show before the worker's next lease, or None: never in place of a lease
    they hold (a reload resumes it), and only while the stage has a unit for them."""
    if unit is not None:
        if Assignment.objects.filter(unit=unit, worker=worker).exists():
            return None
        units = units_open_to(worker=worker, stage=stage).filter(pk=unit.pk)
    else:
        if holds_a_lease(worker=worker, stage=stage, family=family):
            return None
        units = units_open_to(worker=worker, stage=stage, family=family)
    if not units.exists():
        return None
    return live_gold_item(worker, stage)


def gold_every(qualification, live_answered):
    """About how many tasks a worker gets per live gold item: more often while they have answered
    fewer live gold items than a pause needs, where one more gold answer informs most."""
    every = max(1, qualification.live_gold_every)
    if live_answered < qualification.live_min_answers:
        return min(every, max(1, qualification.new_worker_gold_every))
    return every


def live_gold_item(worker, stage):
    """A gold item to mix into this worker's next live task, or None (about one in `gold_every`,
    never two in a row, never one they have answered before).

    Drawn from the worker's progress rather than per request, so reloading the page shows the same
    item instead of a fresh chance to skip it.
    """
    qualification = StageQualification.objects.filter(stage=stage).first()
    if qualification is None:
        return None
    live = GoldAnswer.objects.filter(worker=worker, item__qualification=qualification,
                                     source=GoldAnswer.Source.LIVE)
    tasks = Assignment.objects.filter(worker=worker, unit__stage=stage)
    last_gold = live.order_by("-created_at").values_list("created_at", flat=True).first()
    if last_gold is not None and not tasks.filter(leased_at__gt=last_gold).exists():
        return None
    live_answered = live.count()
    rng = random.Random(f"{worker.pk}:{stage}:{tasks.count()}:{live_answered}")
    if rng.randrange(gold_every(qualification, live_answered)) != 0:
        return None
    candidates = list(qualification.gold_items.filter(active=True, in_live_work=True)
                      .exclude(answers__worker=worker).order_by("pk").values_list("pk", flat=True))
    if not candidates:
        return None
    item = GoldItem.objects.get(pk=rng.choice(candidates))
    return {"id": item.pk, "kind": item.kind, "content": item.content, "question": item.question,
            "options": item.options}
