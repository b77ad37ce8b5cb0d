"""Review with consequences (DESIGN: "Whose work counts"): accepting or rejecting submitted answers.

Every answer (an instruction, a caption, a verification, a human judgement) is provisional until
reviewed. A rejection takes the answer out of every aggregate (decisions, Table 2, the leaderboard,
agreement, snapshots: they read only counted work, `counted_work`), gives its slot back so its unit
asks a different worker, and undoes what was built on it while nothing more was built on that: a
rejected caption that went to the model withdraws its reference, a rejected vote reopens its
reference's decision (its battles leave the ratings until it is decided again), and a rejected caption
an instance was verified on takes it out of the benchmark (annotation/models/benchmark.py) until it is
captioned and verified again. Where more was built (a later caption round, a discarded instance) the
decision stands, and the outcome says so.

A reviewer's decision (`review_work`) is made here once, then told to whoever listens to
`work_reviewed`: the crowd platforms approve or reject the work there (mturk/listeners.py) without
calling back in. Work approved or rejected on a platform's side (its own page, or the admin's
platform submissions) comes in through `accept_work` and `reject_work`, which tell nobody.
"""

from dataclasses import dataclass, field

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from annotation.audit import record_review
from annotation.collection import verification as verification_stage
from annotation.crowdwork import stages
from annotation.crowdwork.decisions import settle_again
from annotation.crowdwork.lock_order import lock_for_review
from annotation.exceptions import AnnotationError
from annotation.models import (
    Assignment,
    Battle,
    Caption,
    HumanJudgement,
    Instance,
    Reference,
    Stage,
    WorkState,
)
from crowdbench.jobs import enqueue

REASON_MAX_CHARS = 2000

# Sent once a reviewer's decision is made, with `assignments` (the answers reviewed), `state`
# (WorkState.ACCEPTED or REJECTED), `reviewer` and `reason`. A listener answers with lines for the
# reviewer, which the outcome carries (`followed`).
work_reviewed = Signal()


@dataclass
class ReviewOutcome:
    """What a review did, for the reviewer's message."""

    changed: int = 0
    unchanged: int = 0
    units_reopened: int = 0
    decisions_reopened: int = 0
    decided: int = 0
    standing: list = field(default_factory=list)
    left_benchmark: list = field(default_factory=list)
    #: What those who listen to `work_reviewed` did with the decision (a platform's approval).
    followed: list = field(default_factory=list)

    def message(self, verb):
        parts = [f"{self.changed} answer(s) {verb}"]
        if self.unchanged:
            parts.append(f"{self.unchanged} already {verb}")
        if self.units_reopened:
            parts.append(f"{self.units_reopened} task(s) back in the queue for another worker")
        if self.decisions_reopened:
            parts.append(f"{self.decisions_reopened} decision(s) reopened")
        if self.decided:
            parts.append(f"{self.decided} decision(s) made")
        text = "; ".join(parts) + "."
        if self.left_benchmark:
            text += " " + " ".join(self.left_benchmark)
        if self.standing:
            text += " Left as they were: " + " ".join(self.standing)
        return text


def _clean_reason(reason, *, required):
    reason = (reason or "").strip()
    if required and not reason:
        raise AnnotationError("Say why: the reason is kept with the answer and shown to whoever reviews it next.")
    if len(reason) > REASON_MAX_CHARS:
        raise AnnotationError(f"The reason is too long ({len(reason)} characters; at most {REASON_MAX_CHARS}).")
    return reason


def _submitted(assignments):
    ids = [getattr(assignment, "pk", assignment) for assignment in assignments]
    lock_for_review(ids)
    return (Assignment.objects.select_for_update(of=("self",)).filter(pk__in=ids, status=Assignment.Status.SUBMITTED)
            .select_related("unit", "unit__family").order_by("pk"))


def accept_work(*, assignments, reviewer=None, reason=""):
    """Accept submitted answers. Where a stage counts only accepted answers, an acceptance that
    completes an item decides it (a caption round, a reference)."""
    return _review_each(assignments, WorkState.ACCEPTED, reviewer, _clean_reason(reason, required=False),
                        _after_acceptance)


def reject_work(*, assignments, reason, reviewer=None):
    """Reject submitted answers with a reason: out of every aggregate, their units asked again of
    someone else, and what was built on them undone while nothing more was built on that. An
    instance whose decision is reopened or discarded takes its battles out of the ratings and
    exports (`counted_battles`) until it is verified again."""
    return _review_each(assignments, WorkState.REJECTED, reviewer, _clean_reason(reason, required=True),
                        _after_rejection)


def review_work(*, assignments, accept, reviewer, reason=""):
    """A reviewer accepts or rejects answers (`accept_work`, `reject_work`), and whoever listens
    to `work_reviewed` is told: where the work was done on a platform, it is approved or rejected
    there too."""
    review = accept_work if accept else reject_work
    outcome = review(assignments=assignments, reviewer=reviewer, reason=reason)
    said = work_reviewed.send(sender=ReviewOutcome, assignments=assignments, reviewer=reviewer, reason=reason,
                              state=WorkState.ACCEPTED if accept else WorkState.REJECTED)
    outcome.followed = [line for _, lines in said for line in lines or ()]
    return outcome


def _review_each(assignments, state, reviewer, reason, consequences):
    outcome = ReviewOutcome()
    judged = []
    with transaction.atomic():
        for assignment in _submitted(assignments):
            if assignment.work_state == state:
                outcome.unchanged += 1
                continue
            before = assignment.work_state
            _set_state(assignment, state, reviewer, reason)
            record_review(assignment=assignment, before=before, reviewer=reviewer, reason=reason)
            if assignment.unit.stage == Stage.PAIRWISE:
                judged.append(assignment)
            outcome.changed += 1
            consequences(assignment, before, outcome)
        _leaderboards_changed(judged)
    return outcome


def _leaderboards_changed(assignments):
    """Whether a human judgement counts changes with its work state: each reviewed judgement is
    stamped, which the leaderboard's fingerprint reads (scoring/freshness.py), and each tournament
    they belong to has its leaderboard computed again in the background, once for a whole batch."""
    if not assignments:
        return
    HumanJudgement.objects.filter(assignment__in=assignments).update(updated_at=timezone.now())
    tournaments = Battle.objects.filter(pk__in={a.unit.battle_id for a in assignments}).values_list(
        "tournament_id", flat=True).distinct()
    for tournament_id in sorted(tournaments):
        enqueue("tasks.refresh_leaderboard", tournament_id)


def _after_acceptance(assignment, before, outcome):
    if before == WorkState.REJECTED:
        outcome.standing.append(f"Answer #{assignment.pk} was rejected before; its task was asked again, "
                                "so accepting it now adds an answer beyond the overlap.")
    outcome.decided += settle_again(assignment.unit)[1]


def _after_rejection(assignment, before, outcome):
    stands, reopened = _undo(assignment, outcome)
    if stands:
        outcome.standing.append(stands)
    outcome.decisions_reopened += reopened
    outcome.units_reopened += stages.reopen_if_needed(assignment.unit, ask_again=True)
    # Under ask until decided the answers left may decide again on their own (two agreeing of three).
    outcome.decided += settle_again(assignment.unit)[1]


def _set_state(assignment, state, reviewer, reason):
    assignment.work_state, assignment.review_reason = state, reason
    assignment.reviewed_by, assignment.reviewed_at = reviewer, timezone.now()
    assignment.save(update_fields=["work_state", "review_reason", "reviewed_by", "reviewed_at"])


def _undo(assignment, outcome):
    """Undo what a rejected answer decided, when nothing more was built on it: (why it stands or
    "", how many decisions reopened)."""
    unit = assignment.unit
    if unit.stage == Stage.CAPTION:
        caption = Caption.objects.filter(assignment=assignment).first()
        return _withdraw_caption(caption, outcome) if caption is not None else ("", 0)
    if unit.stage == Stage.VERIFICATION:
        reference = Reference.objects.select_for_update().filter(pk=unit.reference_id).first()
        if reference is not None and reference.held_for_review:
            # Held because a model contradicted every vote: the votes changed, so the evidence is asked again.
            reference.held_for_review = ""
            reference.save(update_fields=["held_for_review"])
        if reference is None or reference.verdict == Reference.Verdict.PENDING:
            return "", 0
        instance = Instance.objects.select_for_update().get(pk=reference.instance_id)
        try:
            verification_stage.reopen_decision(reference=reference, instance=instance)
        except verification_stage.DecisionStands as stands:
            return str(stands), 0
        return "", 1
    if unit.stage == Stage.INSTRUCTION_GENERATION:
        instance = Instance.objects.select_for_update().filter(instruction_submission__assignment=assignment).first()
        if instance is not None and instance.status != Instance.Status.DISCARDED:
            was_verified = instance.status == Instance.Status.VERIFIED
            instance.status = Instance.Status.DISCARDED
            instance.save(update_fields=["status", "updated_at"])
            if was_verified:
                verification_stage.battles_count_changed(instance)
            for stage in (Stage.CAPTION, Stage.VERIFICATION):
                stages.close_units_no_longer_owed(stage=stage, instance=instance)
        return "", 0
    return "", 0


def _withdraw_caption(caption, outcome):
    instance = Instance.objects.select_for_update().get(pk=caption.instance_id)
    used = instance.current_caption_id == caption.pk or caption.references.exists()
    if not used:
        return "", 0
    if instance.caption_round != caption.round or instance.status == Instance.Status.DISCARDED:
        return (f"Instance #{instance.pk} stays {instance.get_status_display().lower()}: its rejected caption "
                "was already verified on."), 0
    # A reference verified on a rejected caption is withdrawn with it, and the instance leaves the
    # benchmark until it is captioned and verified again: the sheets give the caption a candidate
    # was written from, and the LLM judge reads it, so a row without it, or with a caption nobody
    # vouches for, would not say what was verified.
    was_verified = instance.status == Instance.Status.VERIFIED
    withdrawn = caption.references.exclude(verdict=Reference.Verdict.WITHDRAWN)
    for reference in withdrawn:
        stages.close_units_no_longer_owed(stage=Stage.VERIFICATION, reference=reference)
        if instance.reference_output == reference.text:
            instance.reference_output = ""
    withdrawn.update(verdict=Reference.Verdict.WITHDRAWN)
    instance.status, instance.current_caption = Instance.Status.AWAITING_CAPTION, None
    instance.save(update_fields=["status", "current_caption", "reference_output", "updated_at"])
    if not was_verified:
        return "", 1
    verification_stage.battles_count_changed(instance)
    outcome.left_benchmark.append(
        f"Instance #{instance.pk} leaves the benchmark (later snapshots, Table 2, the leaderboard) and is "
        "asked for a new caption: its rejected caption was already verified on.")
    return "", 1
