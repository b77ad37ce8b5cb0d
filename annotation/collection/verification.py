"""Verification of candidate references (paper §2.1): workers judge the model's answer against the image, and the
family's rule decides the instance.

How the counted answers decide a reference is the stage's aggregation (StageConfig.aggregation).
Votes, the default, apply the verification rule (unanimous, majority, any) in the submit that
completes the reference. A worker model (crowd-kit's Dawid-Skene, GLAD or MACE) needs every
counted answer of the stage to weigh each worker, which is too slow for a request, so a
reference whose answers are complete waits, pending, for the worker-model job
(`decide_by_worker_models`): it fits the models the stages use and decides each waiting reference
by the fitted label, recording the model (`Reference.decided_by`) and its posterior.

A model decides only on evidence (`model_decision`): its label counts when every verifier of the
reference has enough counted answers in the fit (the stage's `model_min_answers`, or a known
accuracy on gold items) and its posterior reaches the stage's `model_min_posterior`; below that
the verification rule decides from the votes. A label that contradicts every counted vote is never
applied silently: the reference is held for a reviewer (`Reference.held_for_review`), who
adjudicates.

A model's decision stays revisable until a snapshot publishes its instance: each run fits again
and, where the evidence now decides otherwise, reopens and decides the reference again, recording
the change (`DecisionChange`, before and after). What a snapshot published stands, as does a
decision something was built on (`reopen_decision`). So the job is idempotent: run twice on the
same answers, it decides and changes nothing the second time. A fit that saw a different set of a
reference's counted answers than the database holds (an answer came in or was rejected meanwhile)
leaves the reference for the next run, so no decision rests on answers that no longer count.
"""

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotation.collection.completion import announce_if_stage_complete
from annotation.collection.stages import (
    close_units_no_longer_owed,
    create_work_units,
    room_for_another_instance,
    stage_config,
    trim_open_slots,
    unbegin_caption_round,
)
from annotation.exceptions import AnnotationError
from annotation.lock_order import lock_assignment_for_submission, lock_item
from annotation.models import (
    Aggregation,
    Battle,
    DecisionChange,
    Instance,
    Reference,
    Snapshot,
    Stage,
    StageConfig,
    Verification,
    WorkerQualification,
    counted_work,
)
from annotation.queue import mark_submitted, stored_answer_for
from annotation.stopping import Agreement
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
    with transaction.atomic():
        assignment, already = lock_assignment_for_submission(
            assignment_id=assignment_id, worker=worker, stage=Stage.VERIFICATION
        )
        if already:
            verification = getattr(assignment, "verification", None)
            return stored_answer_for(worker, verification,
                                     author_id=verification and verification.worker_id)
        reference = assignment.unit.reference
        verification = Verification.objects.create(
            reference=reference, worker=worker, assignment=assignment, is_correct=is_correct,
            problem_in_caption=problem_in_caption, problem_in_response=problem_in_response,
            is_harmful=is_harmful, comment=comment,
        )
        mark_submitted(assignment, active_seconds=active_seconds)
        settle_reference(reference=reference, unit=assignment.unit)
        announce_if_stage_complete(unit=assignment.unit)
    return verification


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


def votes_complete(votes, config, unit):
    """Whether a reference's counted `votes` are all its stage asks: as many as its unit asks, or,
    under ask until decided, once they agree or reach the most it asks. The one definition the
    submit, a review, the worker-model job and the benchmark check read."""
    if config.adaptive:
        return _agreed(votes, config) is not None or len(votes) >= config.overlap
    return unit is not None and len(votes) >= unit.overlap


def awaiting_worker_model(*, family=None):
    """Pending references of families whose verification stage decides by a worker model, whose
    counted answers are all in and which no reviewer holds (the job decides them)."""
    families = StageConfig.objects.filter(stage=Stage.VERIFICATION).exclude(aggregation=Aggregation.VOTES)
    pending = (Reference.objects.filter(verdict=Reference.Verdict.PENDING, held_for_review="",
                                        instance__status=Instance.Status.AWAITING_VERIFICATION,
                                        instance__family__in=families.values("family_id"))
               .select_related("instance__family").order_by("pk"))
    if family is not None:
        pending = pending.filter(instance__family=family)
    waiting = []
    for reference in pending:
        config = stage_config(family=reference.instance.family, stage=Stage.VERIFICATION)
        unit = reference.work_units.filter(stage=Stage.VERIFICATION).first()
        if votes_complete(counted_votes(reference, config), config, unit):
            waiting.append(reference)
    return waiting


def revisable_by_worker_models():
    """References a worker model decided that a later fit may still revise: not adjudicated, and
    whose instance no finished snapshot has published."""
    published = set()
    for digests in Snapshot.objects.filter(status=Snapshot.Status.DONE).values_list("instance_digests", flat=True):
        published.update(int(instance_id) for instance_id in digests)
    models = [value for value in Aggregation.values if value != Aggregation.VOTES]
    return (Reference.objects.filter(decided_by__in=models, adjudicated_by__isnull=True,
                                     verdict__in=[Reference.Verdict.CORRECT, Reference.Verdict.INCORRECT])
            .exclude(instance_id__in=published).select_related("instance__family").order_by("pk"))


@dataclass(frozen=True)
class ModelDecision:
    """What the evidence decides for a reference under a worker model: `by` a model (its label and
    posterior), by the votes (the model's evidence is too thin), or held for a reviewer (`held`, why)."""

    by: str
    is_correct: bool | None = None
    posterior: float | None = None
    held: str = ""


def model_decision(*, fit, votes, config, known_accuracy=frozenset()):
    """Decide from a fit only on evidence (see the module's docstring). `known_accuracy`: workers
    whose accuracy on gold items is known."""
    label, posterior = fit.label_of(votes[0].reference_id)
    is_correct = label == "correct"
    model_name = Reference.DecidedBy(fit.model).label
    if all(vote.is_correct != is_correct for vote in votes):
        said = "correct" if is_correct else "incorrect"
        return ModelDecision(by=Reference.DecidedBy.REVIEWER, held=(
            f"{model_name} says {said} (posterior {posterior:.2f}) where every counted vote "
            f"({len(votes)}) says the opposite."))
    thin = [vote.worker_id for vote in votes
            if fit.answers.get(vote.worker_id, 0) < config.model_min_answers and vote.worker_id not in known_accuracy]
    if thin or posterior < config.model_min_posterior:
        return ModelDecision(by=Aggregation.VOTES)
    return ModelDecision(by=fit.model, is_correct=is_correct, posterior=posterior)


def _workers_of_known_accuracy():
    return frozenset(WorkerQualification.objects.filter(qualification__stage=Stage.VERIFICATION,
                                                        live_accuracy__isnull=False)
                     .values_list("worker_id", flat=True))


def decide_by_worker_models():
    """The worker-model job's work: fit every label model a verification stage uses (and
    Dawid-Skene always, whose reliabilities the researcher pages show) on every counted
    verification answer, store each worker's reliability, and decide the references waiting for
    a model (see the module's docstring). Returns how many references it decided."""
    # pandas and crowd-kit load here, in the job, and stay out of the web workers that submit.
    from annotation import worker_models

    frame = worker_models.verification_frame()
    in_use = set(StageConfig.objects.filter(stage=Stage.VERIFICATION).exclude(aggregation=Aggregation.VOTES)
                 .values_list("aggregation", flat=True))
    fits = {}
    if not frame.empty:
        for model in sorted(in_use | {Aggregation.DAWID_SKENE}):
            fit = worker_models.fit_labels(frame, model)
            worker_models.store_reliabilities(stage=Stage.VERIFICATION, model=model, reliability=fit.reliability,
                                              answers=fit.answers)
            fits[model] = fit
    known = _workers_of_known_accuracy()
    decided = 0
    for waiting in awaiting_worker_model():
        with transaction.atomic():
            lock_item(stage=Stage.VERIFICATION, instance_id=waiting.instance_id, reference_id=waiting.pk)
            reference = Reference.objects.get(pk=waiting.pk)
            if reference.verdict != Reference.Verdict.PENDING or reference.held_for_review:
                continue
            config = stage_config(family=waiting.instance.family, stage=Stage.VERIFICATION)
            votes = _votes_the_fit_saw(fits.get(config.aggregation), reference, config)
            if votes is None:
                continue
            decided += _apply(reference, model_decision(fit=fits[config.aggregation], votes=votes, config=config,
                                                        known_accuracy=known))
    for decision in revisable_by_worker_models():
        with transaction.atomic():
            revise_decision(decision, fits, known)
    return decided


def _votes_the_fit_saw(fit, reference, config):
    """The reference's counted votes when `fit` saw exactly these, else None (wait for the next fit)."""
    votes = counted_votes(reference, config)
    if fit is None or not votes or fit.voters.get(reference.pk) != frozenset(vote.worker_id for vote in votes):
        return None
    return votes


def _apply(reference, decision):
    """Decide a pending reference as `decision` says, or hold it for a reviewer. Returns 1 when decided."""
    if decision.held:
        reference.held_for_review = decision.held
        reference.save(update_fields=["held_for_review"])
        return 0
    if decision.by == Aggregation.VOTES:
        decide_reference(reference=reference)
    else:
        decide_reference(reference=reference, by=decision.by, is_correct=decision.is_correct,
                         posterior=decision.posterior)
    return 1


def revise_decision(stale, fits, known):
    """Decide again a model's decision the latest fit disagrees with, when nothing published or built
    on it stops that; record the change (before and after) either way. Returns the DecisionChange
    or None when the evidence still decides as before."""
    _, reference = lock_item(stage=Stage.VERIFICATION, instance_id=stale.instance_id, reference_id=stale.pk)
    if reference.decided_by != stale.decided_by or reference.verdict != stale.verdict:
        return None
    config = stage_config(family=stale.instance.family, stage=Stage.VERIFICATION)
    fit = fits.get(reference.decided_by)
    votes = _votes_the_fit_saw(fit, reference, config)
    if votes is None:
        return None
    decision = model_decision(fit=fit, votes=votes, config=config, known_accuracy=known)
    is_correct = reference.verdict == Reference.Verdict.CORRECT
    if decision.held:
        after = Reference.Verdict.PENDING
    elif decision.by == Aggregation.VOTES:
        is_correct_now = _verdict(votes, config)
        if is_correct_now == is_correct:
            return None
        after = Reference.Verdict.CORRECT if is_correct_now else Reference.Verdict.INCORRECT
    else:
        if decision.is_correct == is_correct:
            return None
        after = Reference.Verdict.CORRECT if decision.is_correct else Reference.Verdict.INCORRECT
    change = DecisionChange(reference=reference, model=reference.decided_by, before=reference.verdict, after=after,
                            posterior_before=reference.posterior, posterior_after=decision.posterior)
    instance = Instance.objects.select_related("family").get(pk=reference.instance_id)
    try:
        reopen_decision(reference=reference, instance=instance)
    except DecisionStands as stands:
        if reference.decision_changes.filter(applied=False, before=change.before, after=change.after).exists():
            return None  # recorded at an earlier run; the decision still stands
        change.applied, change.note = False, str(stands)[:300]
        change.save()
        return change
    reference.refresh_from_db()
    _apply(reference, decision)
    change.applied = True
    change.note = decision.held[:300] if decision.held else ""
    change.save()
    return change


def _agreed(votes, config):
    return Agreement(config.agree_to_decide).decision([vote.is_correct for vote in votes])


def _verdict(votes, config):
    if config.adaptive and (agreed := _agreed(votes, config)) is not None:
        return agreed
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
    incorrect = [vote for vote in votes if not vote.is_correct]
    if by == Aggregation.VOTES:
        is_correct = _verdict(votes, config)
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
    reference.save()
    _settle_instance(instance=instance, reference=reference, config=config)
    return reference


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
    if (
        config.on_incorrect == StageConfig.IncorrectAction.RECAPTION
        and reference.problem_in_caption
        and instance.caption_round < config.max_caption_rounds
    ):
        instance.status = Instance.Status.AWAITING_CAPTION
        instance.current_caption = None
        instance.caption_round += 1
        instance.save(update_fields=["status", "current_caption", "caption_round", "updated_at"])
        create_work_units(family=instance.family, stage=Stage.CAPTION, instance=instance)
        return
    _discard(instance)
    # Its replacement is asked for at once, not when the sweep next looks.
    create_work_units(family=instance.family, stage=Stage.INSTRUCTION_GENERATION)


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
