"""The collection stages' task pages: instruction generation (paper Fig. 11), the
instruction-conditioned caption (Fig. 12) and verification (Figs. 13-14), each with its gold items."""

import re

from django.conf import settings
from django.db import transaction

from annotation.collection import captions, instructions, verification
from annotation.collection.uploads import store_uploaded_image
from annotation.exceptions import AnnotationError
from annotation.models import Assignment, ImageAsset, InstanceImage
from annotation.typed_text import CAPTION_MAX_CHARS, COMMENT_MAX_CHARS, INSTRUCTION_MAX_CHARS, field_limit
from frontend.page_parts import LICENCES, MAX_IMAGES_PER_INSTRUCTION, gallery, gold_material

# --- instruction generation (paper Fig. 11) -----------------------------------------------------


def instruction_context(unit, posted, assignment=None):
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
        "min_chars": instructions.MIN_INSTRUCTION_CHARS,
        "max_chars": INSTRUCTION_MAX_CHARS,
        "limits": {name: field_limit(ImageAsset, name) for name in ("url", "author", "source_url")},
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
        which = f"image {len(filled) + 1}"
        url, licence, author, source = instructions.check_image_details(
            url=request.POST.get(f"image-{index}-url", ""),
            licence=request.POST.get(f"image-{index}-licence", ""),
            author=request.POST.get(f"image-{index}-author", ""),
            source_url=request.POST.get(f"image-{index}-source", ""), which=which)
        if not upload and not url:
            continue
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


def post_instruction(*, request, assignment_id, worker, active_seconds):
    mine = Assignment.objects.filter(pk=assignment_id, worker=worker).first()
    if mine is not None and hasattr(mine, "instruction_submission"):
        # A second click of Submit: the answer is stored already, so store no images again.
        return f"instance-{mine.instruction_submission.instance_id}"
    # Every typed field is checked before an upload is stored.
    instructions.clean_instruction(request.POST.get("instruction", ""))
    posted = _posted_images(request)
    with transaction.atomic():
        images = []
        for upload, url, licence, author, source in posted:
            details = {"licence": licence, "licence_url": LICENCES[licence], "author": author,
                       "source_url": source, "uploaded_by": worker}
            if upload:
                images.append(store_uploaded_image(upload=upload, **details))
            else:
                images.append(instructions.image_from_url(url=url, **details))
        instance = instructions.submit_instruction(
            assignment_id=assignment_id, worker=worker,
            instruction=request.POST.get("instruction", ""), images=images,
            active_seconds=active_seconds,
        )
        if images and not InstanceImage.objects.filter(instance=instance, image=images[0]).exists():
            # A concurrent duplicate submission won: keep its instance, drop the images made here.
            transaction.set_rollback(True)
    return f"instance-{instance.pk}"


# --- instruction-conditioned caption (paper Fig. 12) -------------------------------------------


def caption_context(unit, posted, assignment=None):
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
        "min_chars": captions.MIN_CAPTION_CHARS,
        "max_chars": CAPTION_MAX_CHARS,
    }


def post_caption(*, request, assignment_id, worker, active_seconds):
    # One box per image, numbered from 0; the service checks the count against the instance.
    texts = []
    while f"caption-{len(texts)}" in request.POST:
        texts.append(request.POST[f"caption-{len(texts)}"])
    caption = captions.submit_caption(assignment_id=assignment_id, worker=worker, texts=texts,
                                      active_seconds=active_seconds)
    return f"caption-{caption.pk}"


# --- verification (paper Figs. 13-14) ----------------------------------------------------------

_PROBLEMS = {"caption": (True, False), "response": (False, True), "both": (True, True)}


def verification_context(unit, posted, assignment=None):
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
        "comment_max_chars": COMMENT_MAX_CHARS,
    }


def _read_verification(posted):
    """(is_correct, problem_in_caption, problem_in_response) from the form, or AnnotationError."""
    verdict = posted.get("verdict", "")
    if verdict not in ("correct", "incorrect"):
        raise AnnotationError("Please say whether the response is correct or incorrect.")
    in_caption, in_response = False, False
    if verdict == "incorrect":
        problem = posted.get("problem", "")
        if problem not in _PROBLEMS:
            raise AnnotationError(
                "Please say where the problem is: in the caption, the response, or both."
            )
        in_caption, in_response = _PROBLEMS[problem]
    return verdict == "correct", in_caption, in_response


def post_verification(*, request, assignment_id, worker, active_seconds):
    is_correct, in_caption, in_response = _read_verification(request.POST)
    stored = verification.submit_verification(
        assignment_id=assignment_id, worker=worker, is_correct=is_correct,
        problem_in_caption=in_caption, problem_in_response=in_response,
        is_harmful=request.POST.get("harmful", "") == "yes",
        comment=request.POST.get("comment", ""), active_seconds=active_seconds,
    )
    return f"verification-{stored.pk}"


def verification_gold_context(item, posted):
    material = gold_material(item["content"])
    posted = posted or {}
    return {
        "instance": {"instruction": material.instruction},
        "gallery": material.gallery,
        "caption_texts": [{"number": number, "text": text}
                          for number, text in enumerate(material.captions, start=1)],
        "reference": {"text": material.response},
        "verdict": posted.get("verdict", ""),
        "problem": posted.get("problem", ""),
        "harmful": posted.get("harmful", "") == "yes",
        "comment": posted.get("comment", ""),
        "comment_max_chars": COMMENT_MAX_CHARS,
    }


def verification_gold_answer(posted, item):
    # Gold verification items are answered "correct" / "incorrect" (their options).
    is_correct, _, _ = _read_verification(posted)
    return "correct" if is_correct else "incorrect"
