"""Verification of candidate references (paper §2.1): workers judge the model's answer against the image, and the
family's rule decides the instance."""

import logging

from django.db import transaction
from django.utils import timezone

from annotation.collection.stages import close_units_no_longer_owed, create_work_units, stage_config
from annotation.exceptions import AnnotationError
from annotation.models import (
    Instance,
    Reference,
    Stage,
    StageConfig,
    Verification,
)
from annotation.queue import lock_assignment_for_submission, mark_submitted, stored_answer_for
from annotation.typed_text import (
    COMMENT_MAX_CHARS,
    clean_typed_text,
)

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
        reference = Reference.objects.select_for_update().get(pk=assignment.unit.reference_id)
        verification = Verification.objects.create(
            reference=reference, worker=worker, assignment=assignment, is_correct=is_correct,
            problem_in_caption=problem_in_caption, problem_in_response=problem_in_response,
            is_harmful=is_harmful, comment=comment,
        )
        if mark_submitted(assignment, active_seconds=active_seconds):
            decide_reference(reference=reference)
    return verification


def _verdict(votes, rule):
    correct = sum(1 for vote in votes if vote.is_correct)
    if rule == StageConfig.VerificationRule.ANY:
        return correct >= 1
    if rule == StageConfig.VerificationRule.MAJORITY:
        return correct * 2 > len(votes)
    return correct == len(votes)


def _most_of(votes, flag):
    return sum(getattr(vote, flag) for vote in votes) * 2 > len(votes)


def decide_reference(*, reference):
    """Apply the family's agreement rule to a reference's verifications (paper §2.1).

    Correct: the instance is verified. Incorrect: discarded, as in the paper, or sent back for a
    new caption when the family asks for that and the verifiers blamed the caption.
    """
    instance = Instance.objects.select_for_update().select_related("family").get(pk=reference.instance_id)
    config = stage_config(family=instance.family, stage=Stage.VERIFICATION)
    votes = list(reference.verifications.all())
    if not votes:
        raise AnnotationError("This reference has no verification yet.")
    incorrect = [vote for vote in votes if not vote.is_correct]
    reference.verdict = (
        Reference.Verdict.CORRECT if _verdict(votes, config.verification_rule)
        else Reference.Verdict.INCORRECT
    )
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
    return instance


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


def record_imported_verdict(*, reference, reference_correct, problem_in_caption, problem_in_response):
    """The outcome a published sheet gives for a reference (human_ratings_* columns)."""
    reference.verdict = Reference.Verdict.CORRECT if reference_correct else Reference.Verdict.INCORRECT
    reference.problem_in_caption = problem_in_caption
    reference.problem_in_response = problem_in_response
    reference.decided_at = timezone.now()
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
