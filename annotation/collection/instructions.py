"""Instruction generation (paper §2.1): a worker writes an instruction for an image, which becomes an instance."""

import logging
import re
from dataclasses import dataclass

from django.db import transaction

from annotation.collection.uploads import store_uploaded_image
from annotation.crowdwork.answers import StageAnswers, submit_answer
from annotation.crowdwork.stages import create_work_units
from annotation.exceptions import AnnotationError
from annotation.image_urls import check_image_url
from annotation.models import (
    ImageAsset,
    Instance,
    InstanceImage,
    InstructionSubmission,
    Stage,
)
from annotation.typed_text import (
    INSTRUCTION_MAX_CHARS,
    clean_typed_text,
    field_limit,
)

logger = logging.getLogger(__name__)

MIN_INSTRUCTION_CHARS = 10
MAX_IMAGES_PER_INSTRUCTION = 8
# Permissive licences only (paper §2.1: the images are released under their own open licences).
LICENCES = {
    "CC0 1.0": "https://creativecommons.org/publicdomain/zero/1.0/",
    "Public Domain Mark 1.0": "https://creativecommons.org/publicdomain/mark/1.0/",
    "CC BY 4.0": "https://creativecommons.org/licenses/by/4.0/",
    "CC BY 2.0": "https://creativecommons.org/licenses/by/2.0/",
    "CC BY-SA 4.0": "https://creativecommons.org/licenses/by-sa/4.0/",
    "CC BY-SA 2.0": "https://creativecommons.org/licenses/by-sa/2.0/",
}
_WEB_ADDRESS = re.compile(r"^https?://[^\s/]+\.[^\s/]+")


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

    def store(assignment):
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
        # The new instance's caption task, made with it: nobody has to wait for the sweep.
        create_work_units(family=family, stage=Stage.CAPTION, instance=instance)
        return instance

    return submit_answer(answers=INSTRUCTIONS, assignment_id=assignment_id, worker=worker, store=store,
                         active_seconds=active_seconds)


# An instruction's answer is the instance it made; what it decides is made with it (its caption task).
INSTRUCTIONS = StageAnswers(stage=Stage.INSTRUCTION_GENERATION, stored="instruction_submission.instance",
                            author="author_id")


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


@dataclass(frozen=True)
class OfferedImage:
    """An image a worker offers with their instruction: a file they upload or a link, with the
    licence it may be published under and who made it. Checked, not yet stored."""

    upload: object
    url: str
    licence: str
    author: str
    source_url: str

    def store(self, worker):
        details = {"licence": self.licence, "licence_url": LICENCES[self.licence],
                   "author": self.author, "source_url": self.source_url, "uploaded_by": worker}
        if self.upload:
            return store_uploaded_image(upload=self.upload, **details)
        return image_from_url(url=self.url, **details)


def offered_image(*, upload=None, url="", licence="", author="", source_url="", which="the image"):
    """The OfferedImage of one image slot of the form, None for a slot left empty, or
    AnnotationError naming the slot and what to fix."""
    url, licence, author, source_url = check_image_details(
        url=url, licence=licence, author=author, source_url=source_url, which=which)
    if not upload and not url:
        return None
    if upload and url:
        raise AnnotationError(f"For {which}, upload a file or give a link, not both.")
    if url and not _WEB_ADDRESS.match(url):
        raise AnnotationError(f"The link of {which} is not a web address (https://...).")
    if source_url and not _WEB_ADDRESS.match(source_url):
        raise AnnotationError(f"The source page of {which} is not a web address (https://...).")
    if licence not in LICENCES:
        raise AnnotationError(f"Please choose the licence of {which}.")
    if not author:
        raise AnnotationError(f"Please name the author of {which} (write “me” for your own photo).")
    return OfferedImage(upload=upload, url=url, licence=licence, author=author, source_url=source_url)


def submit_instruction_with_images(*, assignment_id, worker, instruction, slots, active_seconds=None):
    """`submit_instruction` with the images a worker offered in the form's slots (dicts of
    `offered_image`'s arguments): every field is checked first, and the images are stored only
    when the instruction is, and once, however often the form is sent."""
    submitted = InstructionSubmission.objects.filter(
        assignment_id=assignment_id, assignment__worker=worker).select_related("instance").first()
    if submitted is not None:
        # A second click of Submit: the answer is stored already, so store no images again.
        return submitted.instance
    # Every typed field is checked before an upload is stored.
    clean_instruction(instruction)
    offered = []
    for slot in slots:
        image = offered_image(**slot, which=f"image {len(offered) + 1}")
        if image is not None:
            offered.append(image)
    with transaction.atomic():
        images = [image.store(worker) for image in offered]
        instance = submit_instruction(assignment_id=assignment_id, worker=worker,
                                      instruction=instruction, images=images,
                                      active_seconds=active_seconds)
        if images and not InstanceImage.objects.filter(instance=instance, image=images[0]).exists():
            # A concurrent duplicate submission won: keep its instance, drop the images made here.
            transaction.set_rollback(True)
    return instance
