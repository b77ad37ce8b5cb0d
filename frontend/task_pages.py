"""One entry per crowd stage: what its page shows, and how its answer is read and stored.

A new stage page (pairwise preference, the qualification test) adds an entry to PAGES with a
template extending annotator/task.html; entry points, tokens, drafts, the timer, keyboard
shortcuts and submission are shared and need no change.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from annotation import services
from annotation.exceptions import AnnotationError
from annotation.models import Assignment, InstanceImage, Stage
from annotation.uploads import store_uploaded_image
from frontend.security import image_url_allowed

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


@dataclass(frozen=True)
class GalleryImage:
    number: int
    src: str
    """"" when the browser must not load it; the page then shows `url` as text."""
    url: str
    licence: str
    author: str
    width: int | None
    height: int | None


def gallery(images):
    return [
        GalleryImage(
            number=number,
            src=image.file.url if image.file else (image.url if image_url_allowed(image.url) else ""),
            url=image.url,
            licence=image.licence,
            author=image.author,
            width=image.width,
            height=image.height,
        )
        for number, image in enumerate(images, start=1)
    ]


@dataclass(frozen=True)
class TaskPage:
    stage: str
    template: str
    heading: str
    context: Callable
    """context(unit, posted) -> dict; `posted` is the refused POST to show again, or None."""
    submit: Callable
    """submit(request=, assignment_id=, worker=, active_seconds=) -> the stored answer's label."""
    shortcuts: tuple = field(default=())
    """(keys, what they do), listed on the page; the keys themselves are declared in the form."""


# --- instruction generation (paper Fig. 11) -----------------------------------------------------


def _instruction_context(unit, posted):
    family = unit.family
    posted = posted or {}
    slot_count = 1
    if family.is_multi_image:
        seed_count = family.seedimage_set.count()
        posted_count = len(_posted_slot_indexes(posted))
        slot_count = min(MAX_IMAGES_PER_INSTRUCTION, max(2, seed_count, posted_count))
    slots = [
        {
            "index": index,
            "number": index + 1,
            "url": posted.get(f"image-{index}-url", ""),
            "licence": posted.get(f"image-{index}-licence", ""),
            "author": posted.get(f"image-{index}-author", ""),
            "source": posted.get(f"image-{index}-source", ""),
        }
        for index in range(slot_count)
    ]
    seed_images = [link.image for link in family.seedimage_set.select_related("image")]
    return {
        "family": family,
        "seed_gallery": gallery(seed_images),
        "slots": slots,
        "template_slot": {"index": "__i__", "number": "__n__"},
        "max_images": MAX_IMAGES_PER_INSTRUCTION,
        "licences": list(LICENCES),
        "instruction": posted.get("instruction", ""),
        "min_chars": services.MIN_INSTRUCTION_CHARS,
        "allowed_hosts": settings.IMAGE_URL_ALLOWED_HOSTS,
    }


_SLOT_FIELD = re.compile(r"^image-(\d+)-(?:url|licence|author|source|file)$")


def _posted_slot_indexes(posted, files=None):
    names = list(posted.keys()) + list((files or {}).keys())
    indexes = {int(match.group(1)) for name in names if (match := _SLOT_FIELD.match(name))}
    return sorted(index for index in indexes if index < MAX_IMAGES_PER_INSTRUCTION)


def _posted_images(request):
    """The image slots the worker filled: (upload or None, url, licence, author, source)."""
    filled = []
    for index in _posted_slot_indexes(request.POST, request.FILES):
        upload = request.FILES.get(f"image-{index}-file")
        url = request.POST.get(f"image-{index}-url", "").strip()
        licence = request.POST.get(f"image-{index}-licence", "").strip()
        author = request.POST.get(f"image-{index}-author", "").strip()
        source = request.POST.get(f"image-{index}-source", "").strip()
        if not upload and not url:
            continue
        which = f"image {len(filled) + 1}"
        if upload and url:
            raise AnnotationError(f"For {which}, upload a file or give a link, not both.")
        if url and not re.match(r"^https?://[^\s/]+\.[^\s/]+", url):
            raise AnnotationError(f"The link of {which} is not a web address (https://...).")
        if source and not re.match(r"^https?://[^\s/]+\.[^\s/]+", source):
            raise AnnotationError(f"The source page of {which} is not a web address (https://...).")
        if licence not in LICENCES:
            raise AnnotationError(f"Please choose the licence of {which}.")
        if not author:
            raise AnnotationError(f"Please name the author of {which} (write “me” for your own photo).")
        filled.append((upload, url, licence, author, source))
    return filled


def _submit_instruction(*, request, assignment_id, worker, active_seconds):
    mine = Assignment.objects.filter(pk=assignment_id, worker=worker).first()
    if mine is not None and hasattr(mine, "instruction_submission"):
        # A second click of Submit: the answer is stored already, so store no images again.
        return f"instance-{mine.instruction_submission.instance_id}"
    posted = _posted_images(request)
    with transaction.atomic():
        images = []
        for upload, url, licence, author, source in posted:
            details = {"licence": licence, "licence_url": LICENCES[licence], "author": author,
                       "source_url": source, "uploaded_by": worker}
            if upload:
                images.append(store_uploaded_image(upload=upload, **details))
            else:
                images.append(services.image_from_url(url=url, **details))
        instance = services.submit_instruction(
            assignment_id=assignment_id, worker=worker,
            instruction=request.POST.get("instruction", ""), images=images,
            active_seconds=active_seconds,
        )
        if images and not InstanceImage.objects.filter(instance=instance, image=images[0]).exists():
            # A concurrent duplicate submission won: keep its instance, drop the images made here.
            transaction.set_rollback(True)
    return f"instance-{instance.pk}"


# --- instruction-conditioned caption (paper Fig. 12) -------------------------------------------


def _caption_context(unit, posted):
    instance = unit.instance
    images = gallery(instance.ordered_images())
    posted = posted or {}
    return {
        "instance": instance,
        "gallery": images,
        "captions": [
            {"index": index, "number": image.number, "text": posted.get(f"caption-{index}", "")}
            for index, image in enumerate(images)
        ],
        "min_chars": services.MIN_CAPTION_CHARS,
    }


def _submit_caption(*, request, assignment_id, worker, active_seconds):
    # One box per image, numbered from 0; the service checks the count against the instance.
    texts = []
    while f"caption-{len(texts)}" in request.POST:
        texts.append(request.POST[f"caption-{len(texts)}"])
    caption = services.submit_caption(assignment_id=assignment_id, worker=worker, texts=texts,
                                      active_seconds=active_seconds)
    return f"caption-{caption.pk}"


# --- verification (paper Figs. 13-14) ----------------------------------------------------------

_PROBLEMS = {"caption": (True, False), "response": (False, True), "both": (True, True)}


def _verification_context(unit, posted):
    reference = unit.reference
    instance = unit.instance
    caption = reference.caption or instance.current_caption
    images = gallery(instance.ordered_images())
    texts = list(caption.texts) if caption else []
    posted = posted or {}
    return {
        "instance": instance,
        "gallery": images,
        "caption_texts": [
            {"number": number, "text": text} for number, text in enumerate(texts, start=1)
        ],
        "reference": reference,
        "verdict": posted.get("verdict", ""),
        "problem": posted.get("problem", ""),
        "harmful": posted.get("harmful", "") == "yes",
        "comment": posted.get("comment", ""),
    }


def _submit_verification(*, request, assignment_id, worker, active_seconds):
    verdict = request.POST.get("verdict", "")
    if verdict not in ("correct", "incorrect"):
        raise AnnotationError("Please say whether the response is correct or incorrect.")
    in_caption, in_response = False, False
    if verdict == "incorrect":
        problem = request.POST.get("problem", "")
        if problem not in _PROBLEMS:
            raise AnnotationError(
                "Please say where the problem is: in the caption, the response, or both."
            )
        in_caption, in_response = _PROBLEMS[problem]
    verification = services.submit_verification(
        assignment_id=assignment_id, worker=worker, is_correct=verdict == "correct",
        problem_in_caption=in_caption, problem_in_response=in_response,
        is_harmful=request.POST.get("harmful", "") == "yes",
        comment=request.POST.get("comment", ""), active_seconds=active_seconds,
    )
    return f"verification-{verification.pk}"


PAGES = {
    page.stage: page
    for page in (
        TaskPage(
            stage=Stage.INSTRUCTION_GENERATION,
            template="annotator/instruction_generation.html",
            heading="Write a new instruction",
            context=_instruction_context,
            submit=_submit_instruction,
            shortcuts=(("Ctrl+Enter", "submit"),),
        ),
        TaskPage(
            stage=Stage.CAPTION,
            template="annotator/caption.html",
            heading="Describe the image for the instruction",
            context=_caption_context,
            submit=_submit_caption,
            shortcuts=(("Ctrl+Enter", "submit"),),
        ),
        TaskPage(
            stage=Stage.VERIFICATION,
            template="annotator/verification.html",
            heading="Check the response",
            context=_verification_context,
            submit=_submit_verification,
            shortcuts=(
                ("1", "correct"), ("2", "incorrect"),
                ("3 / 4 / 5", "problem in caption / response / both"),
                ("6", "harmful content on / off"), ("Enter", "submit"),
            ),
        ),
    )
}


def page_for(stage):
    page = PAGES.get(stage)
    if page is None:
        raise AnnotationError("This kind of task has no page yet.")
    return page
