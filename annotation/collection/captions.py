"""Instruction-conditioned captions (paper §2.1): a worker describes what the instruction needs in the image(s)."""

import logging

from annotation import llm
from annotation.crowdwork.answers import StageAnswers, submit_answer
from annotation.crowdwork.stages import close_units_no_longer_owed, stage_config
from annotation.exceptions import AnnotationError
from annotation.models import (
    Caption,
    Instance,
    Stage,
    counted_work,
)
from annotation.typed_text import (
    CAPTION_MAX_CHARS,
    clean_typed_text,
)
from crowdbench.jobs import enqueue

logger = logging.getLogger(__name__)

MIN_CAPTION_CHARS = 20


def submit_caption(*, assignment_id, worker, texts, active_seconds=None):
    """One caption per image, rich enough that a text-only reader could follow the instruction."""
    texts = [
        clean_typed_text(text, max_chars=CAPTION_MAX_CHARS,
                         what=f"The caption of image {number}" if len(texts) > 1 else "The caption")
        for number, text in enumerate(texts, start=1)
    ]

    def store(assignment):
        instance = assignment.unit.instance
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
        return Caption.objects.create(
            instance=instance, texts=texts, author=worker, assignment=assignment,
            round=instance.caption_round,
        )

    return submit_answer(answers=CAPTIONS, assignment_id=assignment_id, worker=worker, store=store,
                         active_seconds=active_seconds)


def settle_caption_round(*, instance, unit):
    """Once the round's unit has all the answers it asks and they count (accepted, or provisional
    where the stage counts those), its newest counted caption goes to the model. `instance` is
    locked by the caller."""
    if instance.status != Instance.Status.AWAITING_CAPTION or unit.instance_id != instance.pk:
        return None
    config = stage_config(family=instance.family, stage=Stage.CAPTION)
    counted = Caption.objects.filter(assignment__unit=unit, round=instance.caption_round).filter(
        counted_work(provisional_counts=config.counts_provisional)).order_by("-created_at", "-pk")
    if counted.count() < unit.overlap:
        return None
    caption = counted.first()
    use_caption(instance=instance, caption=caption)
    return caption


def _settle_round(unit, closed):
    if unit.instance_id is None:
        return None
    return settle_caption_round(instance=unit.instance, unit=unit)


CAPTIONS = StageAnswers(stage=Stage.CAPTION, stored="caption", author="author_id", settle=_settle_round)


def add_caption(*, instance, texts, author=None):
    """A caption from a researcher or an import; it becomes the instance's current caption."""
    caption = Caption.objects.create(instance=instance, texts=list(texts), author=author,
                                     round=instance.caption_round)
    use_caption(instance=instance, caption=caption)
    return caption


def use_caption(*, instance, caption):
    instance.current_caption = caption
    instance.status = Instance.Status.AWAITING_REFERENCE
    instance.save(update_fields=["current_caption", "status", "updated_at"])
    # A caption a researcher added ends the round too: its crowd task asks for nothing more.
    close_units_no_longer_owed(stage=Stage.CAPTION, instance=instance)
    queue_reference_generation(instance_id=instance.pk)


def queue_reference_generation(*, instance_id):
    """Queue the model's reference for an instance once this transaction commits, when a model is set."""
    if not llm.reference_model_configured():
        logger.info("No reference model configured; instance %s waits for a pasted reference.",
                    instance_id)
        return
    enqueue("tasks.generate_reference", instance_id)
