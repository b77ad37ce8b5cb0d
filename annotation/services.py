"""Each stage's transitions (paper §2.1, Fig. 3), one transaction per action."""

import logging

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation import llm
from annotation.exceptions import AnnotationError
from annotation.image_urls import check_image_url
from annotation.models import (
    Caption,
    ImageAsset,
    Instance,
    InstanceImage,
    InstructionFamily,
    InstructionSubmission,
    Reference,
    Stage,
    StageConfig,
    Verification,
    WorkUnit,
)
from annotation.queue import lock_assignment_for_submission, mark_submitted, stored_answer_for
from annotation.typed_text import (
    CAPTION_MAX_CHARS,
    COMMENT_MAX_CHARS,
    INSTRUCTION_MAX_CHARS,
    clean_typed_text,
    field_limit,
)
from crowdbench.jobs import enqueue

logger = logging.getLogger(__name__)

MIN_INSTRUCTION_CHARS = 10
MIN_CAPTION_CHARS = 20


# --- stages -----------------------------------------------------------------------------------


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


def pause_stage(*, family, stage):
    StageConfig.objects.filter(family=family, stage=stage).update(launched_at=None)


def _unit_specs(family, stage):
    """(key, instance, reference) of every unit the stage needs now."""
    if stage == Stage.PAIRWISE:
        # Battles belong to a preference study, which makes their units when it is launched
        # (annotation/preferences.py: launch_study); a family alone does not say which battles.
        return []
    if stage == Stage.INSTRUCTION_GENERATION:
        made = family.instances.exclude(status=Instance.Status.DISCARDED).count()
        open_slots = family.work_units.filter(stage=stage, status=WorkUnit.Status.OPEN).count()
        start = family.work_units.filter(stage=stage).count()
        missing = max(0, family.target_instances - made - open_slots)
        return [(f"family-{family.pk}-slot-{start + k + 1}", None, None) for k in range(missing)]
    if stage == Stage.CAPTION:
        instances = family.instances.filter(status=Instance.Status.AWAITING_CAPTION)
        return [(_caption_key(instance), instance, None) for instance in instances]
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


def _caption_key(instance):
    return f"instance-{instance.pk}-round-{instance.captions.count() + 1}"


def create_work_units(*, family, stage):
    """Create the units a launched stage needs; running it again creates nothing twice."""
    if not is_launched(family=family, stage=stage):
        return 0
    config = stage_config(family=family, stage=stage)
    units = [
        WorkUnit(stage=stage, key=key, family=family, instance=instance, reference=reference,
                 overlap=config.overlap)
        for key, instance, reference in _unit_specs(family, stage)
    ]
    before = WorkUnit.objects.filter(family=family, stage=stage).count()
    WorkUnit.objects.bulk_create(units, ignore_conflicts=True)
    return WorkUnit.objects.filter(family=family, stage=stage).count() - before


def _open_unit_if_launched(*, family, stage, key, instance=None, reference=None):
    if not is_launched(family=family, stage=stage):
        return None
    config = stage_config(family=family, stage=stage)
    unit, _ = WorkUnit.objects.get_or_create(
        stage=stage, key=key,
        defaults={"family": family, "instance": instance, "reference": reference,
                  "overlap": config.overlap},
    )
    return unit


# --- instruction generation ---------------------------------------------------------------------


def clean_instruction(instruction):
    """A typed instruction as stored, or AnnotationError: checked before anything else is saved."""
    instruction = clean_typed_text(instruction, what="The instruction", max_chars=INSTRUCTION_MAX_CHARS)
    if len(instruction) < MIN_INSTRUCTION_CHARS:
        raise AnnotationError(f"Please write an instruction of at least {MIN_INSTRUCTION_CHARS} characters.")
    return instruction


def submit_instruction(*, assignment_id, worker, instruction, images, active_seconds=None):
    """A worker's new instruction of the family with its image(s); creates the instance."""
    instruction = clean_instruction(instruction)
    if not images:
        raise AnnotationError("Please add an image.")
    with transaction.atomic():
        assignment, already = lock_assignment_for_submission(
            assignment_id=assignment_id, worker=worker, stage=Stage.INSTRUCTION_GENERATION
        )
        if already:
            submission = getattr(assignment, "instruction_submission", None)
            instance = submission.instance if submission else None
            return stored_answer_for(worker, instance, author_id=instance and instance.author_id)
        family = assignment.unit.family
        if not family.is_multi_image and len(images) != 1:
            raise AnnotationError("This family takes exactly one image.")
        if family.is_multi_image and len(images) < 2:
            raise AnnotationError("This family needs at least two images.")
        instance = Instance.objects.create(family=family, instruction=instruction, author=worker)
        InstanceImage.objects.bulk_create(
            InstanceImage(instance=instance, image=image, position=position)
            for position, image in enumerate(images)
        )
        InstructionSubmission.objects.create(assignment=assignment, instance=instance)
        mark_submitted(assignment, active_seconds=active_seconds)
        _open_unit_if_launched(family=family, stage=Stage.CAPTION, key=_caption_key(instance),
                               instance=instance)
    return instance


def add_instance(*, family, instruction, images, author=None, imported_from=""):
    """An instance made by a researcher or an import rather than by a crowd worker."""
    instance = Instance.objects.create(family=family, instruction=instruction, author=author,
                                       imported_from=imported_from)
    InstanceImage.objects.bulk_create(
        InstanceImage(instance=instance, image=image, position=position)
        for position, image in enumerate(images)
    )
    return instance


# --- instruction-conditioned captions ----------------------------------------------------------


def submit_caption(*, assignment_id, worker, texts, active_seconds=None):
    """One caption per image, rich enough that a text-only reader could follow the instruction."""
    texts = [
        clean_typed_text(text, max_chars=CAPTION_MAX_CHARS,
                         what=f"The caption of image {number}" if len(texts) > 1 else "The caption")
        for number, text in enumerate(texts, start=1)
    ]
    with transaction.atomic():
        assignment, already = lock_assignment_for_submission(
            assignment_id=assignment_id, worker=worker, stage=Stage.CAPTION
        )
        if already:
            caption = getattr(assignment, "caption", None)
            return stored_answer_for(worker, caption, author_id=caption and caption.author_id)
        instance = Instance.objects.select_for_update().get(pk=assignment.unit.instance_id)
        image_count = instance.instanceimage_set.count()
        if len(texts) != image_count:
            raise AnnotationError(f"Please write one caption for each of the {image_count} images.")
        if instance.captions.filter(texts=texts).exists():
            # The same text would give the model the same prompt, and the same rejected reference.
            raise AnnotationError(
                "This caption is the same as one that was sent back. Please describe what the "
                "instruction needs in more detail."
            )
        for position, text in enumerate(texts, start=1):
            if len(text) < MIN_CAPTION_CHARS:
                which = f"image {position}" if image_count > 1 else "the image"
                raise AnnotationError(
                    f"The caption of {which} is too short: could someone who sees only your text "
                    f"follow the instruction? Write at least {MIN_CAPTION_CHARS} characters."
                )
        caption = Caption.objects.create(
            instance=instance, texts=texts, author=worker, assignment=assignment,
            round=instance.captions.count() + 1,
        )
        unit_done = mark_submitted(assignment, active_seconds=active_seconds)
        if unit_done and instance.status == Instance.Status.AWAITING_CAPTION:
            use_caption(instance=instance, caption=caption)
    return caption


def add_caption(*, instance, texts, author=None):
    """A caption from a researcher or an import; it becomes the instance's current caption."""
    caption = Caption.objects.create(instance=instance, texts=list(texts), author=author,
                                     round=instance.captions.count() + 1)
    use_caption(instance=instance, caption=caption)
    return caption


def use_caption(*, instance, caption):
    instance.current_caption = caption
    instance.status = Instance.Status.AWAITING_REFERENCE
    instance.save(update_fields=["current_caption", "status", "updated_at"])
    queue_reference_generation(instance_id=instance.pk)


def queue_reference_generation(*, instance_id):
    """Queue the model's reference for an instance once this transaction commits, when a model is set."""
    if not llm.reference_model_configured():
        logger.info("No reference model configured; instance %s waits for a pasted reference.",
                    instance_id)
        return
    enqueue("tasks.generate_reference", instance_id)


# --- references --------------------------------------------------------------------------------


def store_reference(*, instance, text, source, caption=None, created_by=None, **details):
    """Store a candidate reference and send the instance to verification, in one transaction.

    A generated reference is unique per (instance, model, prompt); storing it again returns the
    one already there.
    """
    text = (text or "").strip()
    if not text:
        raise AnnotationError("A reference needs some text.")
    with transaction.atomic():
        try:
            with transaction.atomic():
                reference = Reference.objects.create(
                    instance=instance, caption=caption or instance.current_caption, text=text,
                    source=source, created_by=created_by, **details,
                )
        except IntegrityError:
            return Reference.objects.get(
                instance=instance, model=details.get("model", ""),
                prompt_sha256=details.get("prompt_sha256", ""), source=Reference.Source.GENERATED,
            )
        Instance.objects.filter(pk=instance.pk).update(
            status=Instance.Status.AWAITING_VERIFICATION, updated_at=timezone.now()
        )
        instance.status = Instance.Status.AWAITING_VERIFICATION
        _open_unit_if_launched(family=instance.family, stage=Stage.VERIFICATION,
                               key=f"reference-{reference.pk}", instance=instance,
                               reference=reference)
    return reference


def add_manual_reference(*, instance, text, user):
    """A researcher pastes a reference by hand, e.g. when no model is configured."""
    if instance.status not in (Instance.Status.AWAITING_REFERENCE, Instance.Status.AWAITING_VERIFICATION):
        raise AnnotationError(
            f"Instance #{instance.pk} is {instance.get_status_display().lower()}; "
            "a reference can be added once it has a caption."
        )
    return store_reference(instance=instance, text=text, source=Reference.Source.MANUAL,
                           created_by=user)


# --- verification ------------------------------------------------------------------------------


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


def _settle_instance(*, instance, reference, config):
    if reference.verdict == Reference.Verdict.CORRECT:
        instance.status = Instance.Status.VERIFIED
        instance.reference_output = instance.reference_output or reference.text
    elif (
        config.on_incorrect == StageConfig.IncorrectAction.RECAPTION
        and reference.problem_in_caption
        and instance.captions.count() < config.max_caption_rounds
    ):
        instance.status = Instance.Status.AWAITING_CAPTION
        instance.current_caption = None
        instance.save(update_fields=["status", "current_caption", "updated_at"])
        _open_unit_if_launched(family=instance.family, stage=Stage.CAPTION,
                               key=_caption_key(instance), instance=instance)
        return
    else:
        instance.status = Instance.Status.DISCARDED
    instance.save(update_fields=["status", "reference_output", "updated_at"])


def record_imported_verdict(*, reference, gpt4_correct, problem_in_caption, problem_in_gpt4):
    """The outcome a published sheet gives for a reference (human_ratings_* columns)."""
    reference.verdict = Reference.Verdict.CORRECT if gpt4_correct else Reference.Verdict.INCORRECT
    reference.problem_in_caption = problem_in_caption
    reference.problem_in_response = problem_in_gpt4
    reference.decided_at = timezone.now()
    reference.save()
    instance = reference.instance
    # A published sheet keeps a row whose candidate was wrong when it gives a human-written
    # reference_output (most of visit_bench_multi_images.csv does), so only a row without one
    # is discarded.
    kept = gpt4_correct or bool(instance.reference_output.strip())
    instance.status = Instance.Status.VERIFIED if kept else Instance.Status.DISCARDED
    instance.save(update_fields=["status", "updated_at"])
    return reference


def check_image_details(*, url="", licence="", author="", source_url="", which="the image"):
    """The image's typed details, each within its database column and free of control characters;
    (url, licence, author, source_url) cleaned, or AnnotationError naming the field."""
    def clean(value, name, label):
        return clean_typed_text(value, what=f"The {label} of {which}", multiline=False,
                                max_chars=field_limit(ImageAsset, name))

    return (clean(url, "url", "link"), clean(licence, "licence", "licence"),
            clean(author, "author", "author"), clean(source_url, "source_url", "source page"))


def image_from_url(*, url, licence="", licence_url="", author="", source_url="", uploaded_by=None):
    """An image we reference by URL (Openverse / Creative Commons) with its licence metadata."""
    url, licence, author, source_url = check_image_details(url=url, licence=licence, author=author,
                                                           source_url=source_url)
    check_image_url(url)
    return ImageAsset.objects.create(url=url, licence=licence, licence_url=licence_url,
                                     author=author, source_url=source_url, uploaded_by=uploaded_by)
