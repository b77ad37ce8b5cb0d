"""Instruction generation (paper §2.1): a worker writes an instruction for an image, which becomes an instance."""

import logging

from django.db import transaction

from annotation.collection.stages import caption_key, open_unit_if_launched
from annotation.exceptions import AnnotationError
from annotation.image_urls import check_image_url
from annotation.models import (
    ImageAsset,
    Instance,
    InstanceImage,
    InstructionSubmission,
    Stage,
)
from annotation.queue import lock_assignment_for_submission, mark_submitted, stored_answer_for
from annotation.typed_text import (
    INSTRUCTION_MAX_CHARS,
    clean_typed_text,
    field_limit,
)

logger = logging.getLogger(__name__)

MIN_INSTRUCTION_CHARS = 10


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
        open_unit_if_launched(family=family, stage=Stage.CAPTION, key=caption_key(instance),
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
