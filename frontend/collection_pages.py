"""The collection stages' pages: instruction generation (paper Fig. 11), the
instruction-conditioned caption (Fig. 12) and verification (Figs. 13-14), each with its gold items."""

import re

from django.conf import settings

from annotation.collection import captions, instructions, verification
from annotation.collection.instructions import LICENCES, MAX_IMAGES_PER_INSTRUCTION
from annotation.exceptions import AnnotationError
from annotation.models import ImageAsset
from annotation.typed_text import CAPTION_MAX_CHARS, COMMENT_MAX_CHARS, INSTRUCTION_MAX_CHARS, field_limit
from frontend.page_parts import gallery, gold_material

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


def _image_slots(request):
    return [{"upload": request.FILES.get(f"image-{index}-file"),
             "url": request.POST.get(f"image-{index}-url", ""),
             "licence": request.POST.get(f"image-{index}-licence", ""),
             "author": request.POST.get(f"image-{index}-author", ""),
             "source_url": request.POST.get(f"image-{index}-source", "")}
            for index in _posted_slot_indexes(request.POST, request.FILES)]


def post_instruction(*, request, assignment_id, worker, active_seconds):
    instance = instructions.submit_instruction_with_images(
        assignment_id=assignment_id, worker=worker, instruction=request.POST.get("instruction", ""),
        slots=_image_slots(request), active_seconds=active_seconds)
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
