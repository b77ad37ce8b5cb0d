"""Verification of candidate references (paper §2.1): workers judge the model's answer against the image, and the
family's rule decides the instance.

How the counted answers decide a reference is the stage's aggregation (StageConfig.aggregation).
Votes, the default, apply the verification rule (unanimous, majority, any) in the submit that
completes the reference. A worker model (crowd-kit's Dawid-Skene, GLAD or MACE) needs every
counted answer of the stage to weigh each worker, which is too slow for a request, so a
reference whose answers are complete waits, pending, for the worker-model job
(annotation/collection/worker_model_job.py), which decides it through `decide_reference` and
`mark_decided` here and may revise it later (`reopen_decision`).
"""

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotation.crowdwork.answers import StageAnswers, submit_answer
from annotation.crowdwork.lock_order import lock_item
from annotation.crowdwork.stages import (
    close_units_no_longer_owed,
    create_work_units,
    room_for_another_instance,
    stage_config,
    trim_open_slots,
    unbegin_caption_round,
)
from annotation.crowdwork.stopping import WorkerAware, verification_stopping
from annotation.exceptions import AnnotationError
from annotation.models import (
    Aggregation,
    Battle,
    Instance,
    Reference,
    Stage,
    StageConfig,
    Verification,
    counted_work,
    unreviewed_answers,
)
from annotation.typed_text import (
    COMMENT_MAX_CHARS,
    clean_typed_text,
)
from crowdbench.jobs import enqueue

WORKER_MODEL_JOB = "tasks.fit_worker_models"

logger = logging.getLogger(__name__)



def submit_verification(*, assignment_id, worker, is_correct, problem_in_caption=False,
                        problem_in_response=False, is_harmful=False, comment="",
                        active_seconds=None):
    """A verifier's judgement of a candidate reference; decides it once all verifiers are in."""
    if is_correct and (problem_in_caption or problem_in_response):
        raise AnnotationError("A correct response has no problem to point at.")
    if not is_correct and not (problem_in_caption or problem_in_response):
        raise AnnotationError("Please say where the problem is: in the caption, the response, or both.")
    comment = clean_typed_text(comment, what="The comment", max_chars=COMMENT_MAX_CHARS)

    def store(assignment):
        return Verification.objects.create(
            reference=assignment.unit.reference, worker=worker, assignment=assignment, is_correct=is_correct,
            problem_in_caption=problem_in_caption, problem_in_response=problem_in_response,
            is_harmful=is_harmful, comment=comment,
        )

    return submit_answer(answers=VERIFICATIONS, assignment_id=assignment_id, worker=worker, store=store,
                         active_seconds=active_seconds)


def counted_votes(reference, config):
    """The reference's verifications that count: accepted, provisional where the stage counts
    those, and imported ones."""
    return list(reference.verifications.filter(counted_work(provisional_counts=config.counts_provisional))
                .order_by("pk"))


def settle_reference(*, reference, unit):
    """Decide a pending reference once its counted votes reach what its unit asks, or under ask
    until decided once they agree (or reach the most it asks): at once by votes, or, under a worker
    model, by the worker-model job, queued here. `reference` is locked by the caller."""
    if reference.verdict != Reference.Verdict.PENDING:
        return None
    config = stage_config(family=unit.family, stage=Stage.VERIFICATION)
    if not votes_complete(counted_votes(reference, config), config, unit):
        return None
    if config.aggregation != Aggregation.VOTES:
        enqueue(WORKER_MODEL_JOB)
        return None
    return decide_reference(reference=reference)


def _settle_reference_of(unit, closed):
    if unit.reference_id is None:
        return None
    return settle_reference(reference=unit.reference, unit=unit)


VERIFICATIONS = StageAnswers(stage=Stage.VERIFICATION, stored="verification", author="worker_id",
                             settle=_settle_reference_of)


def votes_complete(votes, config, unit):
    """Whether a reference's counted `votes` are all its stage asks: as many as its unit asks, or,
    under ask until decided, once they decide or reach the most it asks. The one definition the
    submit, a review, the worker-model job and the benchmark check read. `unit`: its verification
    unit, or what it asks (`Asked`).

    Under ask until decided a unit asks what its answers needed when they closed it (`overlap`),
    and those answers stay enough once they all count: a weighed rule reads its verifiers'
    accuracies, which move with every gold answer and every refit after, and a reference whose
    closed unit no longer "decides" on them would wait for an answer nothing asks for. As many
    counted votes while some of its answers wait for a review are not the answers that closed it
    (a rejected answer accepted again after another replaced it), and wait for the rule."""
    if unit is not None and len(votes) >= unit.overlap and (
            not config.adaptive or config.counts_provisional or not _unreviewed(unit)):
        return True
    return config.adaptive and (len(votes) >= config.overlap or _decided(votes, config)[0] is not None)


@dataclass(frozen=True)
class Asked:
    """What a reference's verification unit asks, as `votes_complete` reads it: how many answers,
    and how many of those it holds wait for a review, read in bulk by the worker-model job."""

    overlap: int
    unreviewed: int


def _unreviewed(unit):
    if isinstance(unit, Asked):
        return unit.unreviewed
    return unit.assignments.filter(unreviewed_answers()).count()


def _decided(votes, config):
    """(what the stage's stopping rule decides from `votes` or None, the rule, the votes as it reads them)."""
    rule = verification_stopping(config)
    answers = rule.read([(vote.is_correct, vote.worker_id) for vote in votes])
    return rule.decision(answers), rule, answers


def verdict_by_votes(votes, config):
    if config.adaptive:
        decided, rule, answers = _decided(votes, config)
        if decided is not None:
            return decided
        if isinstance(rule, WorkerAware):
            # Undecided at the most it asks: the more probable verdict, as the weights say.
            return rule.leading(answers)
    rule = config.verification_rule
    correct = sum(1 for vote in votes if vote.is_correct)
    if rule == StageConfig.VerificationRule.ANY:
        return correct >= 1
    if rule == StageConfig.VerificationRule.MAJORITY:
        return correct * 2 > len(votes)
    return correct == len(votes)


def _most_of(votes, flag):
    return sum(getattr(vote, flag) for vote in votes) * 2 > len(votes)


def decide_reference(*, reference, by=Aggregation.VOTES, is_correct=None, posterior=None):
    """Decide a reference from its verifications (paper §2.1): by the family's agreement rule, or,
    `by` a worker model, with the model's label (`is_correct`) and its `posterior`. Where the
    problem lies is said by most of those who found it wrong, whatever decided it.

    Correct: the instance is verified. Incorrect: discarded, as in the paper, or sent back for a
    new caption when the family asks for that and the verifiers blamed the caption.
    """
    instance = Instance.objects.select_for_update().select_related("family").get(pk=reference.instance_id)
    config = stage_config(family=instance.family, stage=Stage.VERIFICATION)
    votes = counted_votes(reference, config)
    if not votes:
        raise AnnotationError("This reference has no verification yet.")
    mark_decided(reference, votes, config, by=by, is_correct=is_correct, posterior=posterior)
    reference.save()
    _settle_instance(instance=instance, reference=reference, config=config)
    return reference


# The fields `mark_decided` sets, for a bulk update of references it decided.
DECIDED_FIELDS = ["verdict", "decided_by", "posterior", "problem_in_caption", "problem_in_response",
                  "flagged_harmful", "decided_at"]


def mark_decided(reference, votes, config, *, by=Aggregation.VOTES, is_correct=None, posterior=None):
    """Set a reference's decision from its counted `votes` (see `decide_reference`), unsaved."""
    incorrect = [vote for vote in votes if not vote.is_correct]
    if by == Aggregation.VOTES:
        is_correct = verdict_by_votes(votes, config)
    reference.verdict = Reference.Verdict.CORRECT if is_correct else Reference.Verdict.INCORRECT
    reference.decided_by, reference.posterior = by, posterior
    # A problem counts when most of those who found the reference wrong point at it.
    reference.problem_in_caption = _most_of(incorrect, "problem_in_caption")
    reference.problem_in_response = _most_of(incorrect, "problem_in_response")
    if reference.verdict == Reference.Verdict.INCORRECT and not (
        reference.problem_in_caption or reference.problem_in_response
    ):
        reference.problem_in_response = True
    if reference.verdict == Reference.Verdict.CORRECT:
        reference.problem_in_caption = reference.problem_in_response = False
    reference.flagged_harmful = any(vote.is_harmful for vote in votes)
    reference.decided_at = timezone.now()


def verify_instance(*, instance, reference=None):
    """Make an instance verified, with its verified reference in `reference_output`.

    The one door every way of verifying a reference goes through: the crowd's verdict
    (`decide_reference`, for a generated or a pasted candidate alike) and a published sheet's
    (`record_imported_verdict`, from the import command, the admin's import page or the demo).
    Battles (preferences/tournaments.reference_responses), the reference-backed judge's prompt and
    every export read `reference_output`, so a verified instance without one took part in none of
    them.

    The verified reference is the human-written one the instance already holds (a published
    sheet's reference_output), else `reference`, the candidate verified correct. The instance's
    other candidates are no longer asked about. Returns the instance.
    """
    if reference is not None and (reference.verdict != Reference.Verdict.CORRECT
                                  or reference.instance_id != instance.pk):
        raise AnnotationError(f"Reference #{reference.pk} is not a correct reference of "
                              f"instance #{instance.pk}.")
    if not instance.reference_output.strip():
        instance.reference_output = reference.text if reference is not None else ""
    if not instance.reference_output.strip():
        raise AnnotationError(f"Instance #{instance.pk} has no correct reference to be verified with.")
    close_units_no_longer_owed(stage=Stage.VERIFICATION, instance=instance)
    instance.status = Instance.Status.VERIFIED
    instance.save(update_fields=["status", "reference_output", "updated_at"])
    battles_count_changed(instance)
    return instance


def battles_count_changed(instance):
    """An instance was verified or left verified: its battles (`counted_battles`) enter or leave the
    leaderboards of their tournaments, which are computed again in the background."""
    tournaments = Battle.objects.filter(instance=instance).values_list("tournament_id", flat=True).distinct()
    for tournament_id in sorted(tournaments):
        enqueue("tasks.refresh_leaderboard", tournament_id)


def _discard(instance):
    close_units_no_longer_owed(stage=Stage.VERIFICATION, instance=instance)
    instance.status = Instance.Status.DISCARDED
    instance.save(update_fields=["status", "updated_at"])


def _settle_instance(*, instance, reference, config):
    if reference.verdict == Reference.Verdict.CORRECT:
        verify_instance(instance=instance, reference=reference)
        return
    # Whatever the verdict, the instance's other candidates (a reference pasted while the model's
    # was being verified) are no longer asked about.
    close_units_no_longer_owed(stage=Stage.VERIFICATION, instance=instance)
    if asks_new_caption(instance=instance, reference=reference, config=config):
        begin_new_caption_round(instance)
        return
    _discard(instance)
    # Its replacement is asked for at once, not when the sweep next looks.
    create_work_units(family=instance.family, stage=Stage.INSTRUCTION_GENERATION)


def asks_new_caption(*, instance, reference, config):
    """Whether an instance whose reference was decided incorrect goes back for a new caption."""
    return (config.on_incorrect == StageConfig.IncorrectAction.RECAPTION and reference.problem_in_caption
            and instance.caption_round < config.max_caption_rounds)


def begin_new_caption_round(instance):
    instance.status = Instance.Status.AWAITING_CAPTION
    instance.current_caption = None
    instance.caption_round += 1
    instance.save(update_fields=["status", "current_caption", "caption_round", "updated_at"])
    create_work_units(family=instance.family, stage=Stage.CAPTION, instance=instance)


def adjudicate(*, reference, reviewer, is_correct, problem_in_caption=False, problem_in_response=False,
               note):
    """A reviewer decides a reference where its verifiers disagree, instead of the stage's rule;
    recorded as an adjudication (who, why). A reference already decided is decided again while
    nothing was built on its decision (`reopen_decision`)."""
    if is_correct and (problem_in_caption or problem_in_response):
        raise AnnotationError("A correct response has no problem to point at.")
    if not is_correct and not (problem_in_caption or problem_in_response):
        raise AnnotationError("Say where the problem is: in the caption, the response, or both.")
    note = clean_typed_text(note, what="The adjudication note", max_chars=COMMENT_MAX_CHARS)
    if not note:
        raise AnnotationError("Say why: the note is kept with the decision.")
    with transaction.atomic():
        _, reference = lock_item(stage=Stage.VERIFICATION, instance_id=reference.instance_id, reference_id=reference.pk)
        instance = Instance.objects.select_related("family").get(pk=reference.instance_id)
        if reference.verdict == Reference.Verdict.WITHDRAWN:
            raise AnnotationError(f"Reference #{reference.pk} was withdrawn: its caption was rejected.")
        if reference.verdict != Reference.Verdict.PENDING:
            reopen_decision(reference=reference, instance=instance)
            reference.refresh_from_db()
            instance.refresh_from_db()
        config = stage_config(family=instance.family, stage=Stage.VERIFICATION)
        reference.verdict = Reference.Verdict.CORRECT if is_correct else Reference.Verdict.INCORRECT
        reference.problem_in_caption, reference.problem_in_response = problem_in_caption, problem_in_response
        reference.flagged_harmful = reference.verifications.filter(is_harmful=True).exists()
        reference.decided_at = timezone.now()
        reference.decided_by, reference.posterior = Reference.DecidedBy.REVIEWER, None
        reference.adjudicated_by, reference.adjudication_note = reviewer, note
        reference.held_for_review = ""
        reference.save()
        _settle_instance(instance=instance, reference=reference, config=config)
    return reference


class DecisionStands(AnnotationError):
    """A reference's decision that cannot be reopened: more was built on it than can be undone."""


def reopen_decision(*, reference, instance):
    """Undo a reference's decision because a vote it counted was rejected, while nothing was built
    on it but what can be undone: a verified instance; a discarded one while the family has room
    for it again (a replacement task nobody holds is closed again, one that was answered or is
    held keeps the family's target); or a new caption round nobody was asked for. Raises
    DecisionStands, changing nothing, when the decision must stand. Both rows are locked by the
    caller; the reference's unit is reopened by the caller (review)."""
    stands = f"Instance #{instance.pk}'s decision stands"
    if reference.verdict == Reference.Verdict.CORRECT and instance.status == Instance.Status.VERIFIED:
        pass
    elif reference.verdict == Reference.Verdict.INCORRECT and instance.status == Instance.Status.DISCARDED:
        if not room_for_another_instance(instance.family):
            raise DecisionStands(f"{stands}: its replacement was written or is being written, and the family "
                                 "has all the instances it asks for.")
    elif (reference.verdict == Reference.Verdict.INCORRECT and instance.status == Instance.Status.AWAITING_CAPTION
          and reference.caption is not None and instance.caption_round == reference.caption.round + 1):
        if not unbegin_caption_round(instance):
            raise DecisionStands(f"{stands}: its new caption round was offered to workers.")
        instance.caption_round -= 1
        instance.current_caption = reference.caption
    else:
        raise DecisionStands(f"{stands}: more was built on it (it is {instance.get_status_display().lower()} now).")
    was_verified = instance.status == Instance.Status.VERIFIED
    was_discarded = instance.status == Instance.Status.DISCARDED
    reference.verdict = Reference.Verdict.PENDING
    reference.problem_in_caption = reference.problem_in_response = reference.flagged_harmful = False
    reference.decided_at = None
    reference.decided_by, reference.posterior = "", None
    reference.held_for_review = ""
    reference.save(update_fields=["verdict", "problem_in_caption", "problem_in_response", "flagged_harmful",
                                  "decided_at", "decided_by", "posterior", "held_for_review"])
    if instance.reference_output == reference.text:
        instance.reference_output = ""
    instance.status = Instance.Status.AWAITING_VERIFICATION
    instance.save(update_fields=["status", "reference_output", "caption_round", "current_caption", "updated_at"])
    if was_verified:
        battles_count_changed(instance)
    if was_discarded:
        trim_open_slots(family=instance.family)
    return True


def record_imported_verdict(*, reference, reference_correct, problem_in_caption, problem_in_response):
    """The outcome a published sheet gives for a reference (human_ratings_* columns)."""
    reference.verdict = Reference.Verdict.CORRECT if reference_correct else Reference.Verdict.INCORRECT
    reference.problem_in_caption = problem_in_caption
    reference.problem_in_response = problem_in_response
    reference.decided_at = timezone.now()
    reference.decided_by, reference.posterior = Reference.DecidedBy.SHEET, None
    reference.save()
    instance = reference.instance
    # A published sheet keeps a row whose candidate was wrong when it gives a human-written
    # reference_output (most of visit_bench_multi_images.csv does), so only a row without one
    # is discarded.
    if reference_correct or instance.reference_output.strip():
        verify_instance(instance=instance, reference=reference if reference_correct else None)
    else:
        _discard(instance)
    return reference
