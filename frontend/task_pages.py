"""One entry per crowd stage: what its page shows, and how its answer is read and stored.

A new stage page adds an entry to PAGES with a template extending annotator/task.html; entry
points, tokens, drafts, the timer, keyboard shortcuts and submission are shared and need no change.
A page that can show a gold item as one of its own tasks (live gold items, paper §2.2 kept current)
also says how to build its context from a gold item and how to read the answer to compare.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from annotation.collection import captions, instructions, verification
from annotation.collection.uploads import store_uploaded_image
from annotation.exceptions import AnnotationError
from annotation.image_urls import image_url_allowed
from annotation.models import CHIRP_CRITERIA, Assignment, ImageAsset, Instance, InstanceImage, Side, Stage
from annotation.preferences.judgements import pairwise_task, submit_pairwise_judgement
from annotation.typed_text import CAPTION_MAX_CHARS, COMMENT_MAX_CHARS, INSTRUCTION_MAX_CHARS, field_limit

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
            src=image.browser_url,
            url=image.url,
            licence=image.licence,
            author=image.author,
            width=image.width,
            height=image.height,
        )
        for number, image in enumerate(images, start=1)
    ]


# --- gold items (mturk.GoldItem): what their content shows ------------------------------------


@dataclass(frozen=True)
class GoldMaterial:
    """A gold item's content as the pages show it.

    The content may name an `instance` (its instruction, images, caption and reference are then
    the defaults) and give any of `instruction`, `image_url` / `image_urls`, `caption` (text or a
    list, one per image), `response` (verification), `response_1` / `response_2` (pairwise, shown
    left / right), `criteria` (true: ask CHIRP's criteria too) and `rubric`.
    """

    instruction: str
    gallery: list
    captions: list
    response: str
    response_1: str
    response_2: str
    criteria: bool
    rubric: str


def gold_material(content):
    content = content if isinstance(content, dict) else {"instruction": str(content or "")}
    instance = None
    if str(content.get("instance", "")).isdigit():
        instance = (Instance.objects.select_related("current_caption")
                    .filter(pk=int(content["instance"])).first())
    if content.get("image_urls") or content.get("image_url"):
        urls = content.get("image_urls") or [content["image_url"]]
        images = [
            GalleryImage(number=number, src=str(url) if image_url_allowed(str(url)) else "",
                         url=str(url), licence="", author="", width=None, height=None)
            for number, url in enumerate(urls, start=1)
        ]
    else:
        images = gallery(instance.ordered_images()) if instance else []
    captions = content.get("caption")
    if captions is None and instance is not None and instance.current_caption:
        captions = instance.current_caption.texts
    if isinstance(captions, str):
        captions = [captions]
    return GoldMaterial(
        instruction=str(content.get("instruction") or (instance.instruction if instance else "")),
        gallery=images,
        captions=[str(text) for text in captions or []],
        response=str(content.get("response") or (instance.reference_output if instance else "")),
        response_1=str(content.get("response_1") or ""),
        response_2=str(content.get("response_2") or ""),
        criteria=bool(content.get("criteria")),
        rubric=str(content.get("rubric") or ""),
    )


@dataclass(frozen=True)
class TaskPage:
    stage: str
    template: str
    heading: str
    context: Callable
    """context(unit, posted, assignment) -> dict; `posted` is the refused POST to show again, or
    None; `assignment` is None in an MTurk preview."""
    submit: Callable
    """submit(request=, assignment_id=, worker=, active_seconds=) -> the stored answer's label."""
    shortcuts: tuple = field(default=())
    """(keys, what they do), listed on the page; the keys themselves are declared in the form."""
    gold_context: Callable | None = None
    """gold_context(item, posted) -> the same context as `context`, from a live gold item."""
    gold_answer: Callable | None = None
    """gold_answer(posted, item) -> the answer compared with the gold item's; raises like submit."""
    layout: str = ""
    """A modifier of the task layout: "wide" gives the material more room than the form."""


# --- instruction generation (paper Fig. 11) -----------------------------------------------------


def _instruction_context(unit, posted, assignment=None):
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


def _submit_instruction(*, request, assignment_id, worker, active_seconds):
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


def _caption_context(unit, posted, assignment=None):
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


def _submit_caption(*, request, assignment_id, worker, active_seconds):
    # One box per image, numbered from 0; the service checks the count against the instance.
    texts = []
    while f"caption-{len(texts)}" in request.POST:
        texts.append(request.POST[f"caption-{len(texts)}"])
    caption = captions.submit_caption(assignment_id=assignment_id, worker=worker, texts=texts,
                                      active_seconds=active_seconds)
    return f"caption-{caption.pk}"


# --- verification (paper Figs. 13-14) ----------------------------------------------------------

_PROBLEMS = {"caption": (True, False), "response": (False, True), "both": (True, True)}


def _verification_context(unit, posted, assignment=None):
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


def _submit_verification(*, request, assignment_id, worker, active_seconds):
    is_correct, in_caption, in_response = _read_verification(request.POST)
    stored = verification.submit_verification(
        assignment_id=assignment_id, worker=worker, is_correct=is_correct,
        problem_in_caption=in_caption, problem_in_response=in_response,
        is_harmful=request.POST.get("harmful", "") == "yes",
        comment=request.POST.get("comment", ""), active_seconds=active_seconds,
    )
    return f"verification-{stored.pk}"


def _verification_gold_context(item, posted):
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


def _verification_gold_answer(posted, item):
    # Gold verification items are answered "correct" / "incorrect" (their options).
    is_correct, _, _ = _read_verification(posted)
    return "correct" if is_correct else "incorrect"


# --- pairwise preference (paper §4; CHIRP C.2.1 and Fig. 19; Prometheus-Vision rubrics) ----------

# CHIRP's survey questions word for word (Appendix C.2.1, as its workers saw them in Fig. 19);
# the two responses are "Assistant 1" and "Assistant 2" there and here. Overall is the forced choice.
CRITERION_QUESTIONS = {
    "overall": ("Overall Preference",
                "Which assistant's response do you prefer overall, considering all factors?"),
    "relevance_and_completeness": (
        "Relevance and Completeness Evaluation",
        "Which assistant's response is more relevant to the question and provides a more complete "
        "answer?"),
    "understanding_and_reasoning": (
        "Understanding and Reasoning",
        "Which assistant's answer displays a better understanding of concepts and better reasoning "
        "in its response?"),
    "hallucination": (
        "Hallucination Evaluation",
        "Which assistant accurately describes the image without adding or describing objects or "
        "elements that don't exist in the image?"),
    "detail": (
        "Detail Evaluation",
        "Which assistant's description of the image is more detailed, taking into consideration "
        "both the amount and quality of the details provided?"),
}
RUBRIC_SCORES = (1, 2, 3, 4, 5)


def _field_of(criterion):
    return "choice" if criterion == "overall" else f"criterion-{criterion}"


def _pairwise_questions(posted, *, criteria, rubric):
    posted = posted or {}
    questions = [
        {"name": _field_of(criterion), "title": CRITERION_QUESTIONS[criterion][0],
         "text": CRITERION_QUESTIONS[criterion][1], "value": posted.get(_field_of(criterion), "")}
        for criterion in ("overall", *criteria)
    ]
    scores = [
        {"name": f"score-{side}", "title": f"Score of Assistant {number}",
         "value": posted.get(f"score-{side}", "")}
        for number, side in enumerate(Side.values, start=1)
    ] if rubric else []
    return questions, scores


def _pairwise_context(unit, posted, assignment=None):
    task = pairwise_task(assignment=assignment, unit=unit)
    battle = task["battle"]
    questions, scores = _pairwise_questions(posted, criteria=task["criteria"], rubric=task["rubric"])
    return {
        "instance": battle.instance,
        "gallery": gallery(battle.instance.ordered_images()),
        "left": task["left"].text,
        "right": task["right"].text,
        "questions": questions,
        "scores": scores,
        "rubric": task["rubric"],
        "score_values": RUBRIC_SCORES,
    }


def _read_pairwise(posted, *, criteria=True, rubric=True):
    choice = posted.get("choice", "")
    if choice not in Side.values:
        raise AnnotationError("Please choose the response you prefer overall (1 or 2).")
    chosen = {
        name: posted[_field_of(name)] for name in CHIRP_CRITERIA[1:]
        if criteria and posted.get(_field_of(name))
    }
    scores = {side: posted[f"score-{side}"] for side in Side.values
              if rubric and posted.get(f"score-{side}")}
    return choice, chosen, scores


def _submit_pairwise(*, request, assignment_id, worker, active_seconds):
    # The choices name the shown sides; the service maps them to A and B with the stored order.
    choice, criteria, scores = _read_pairwise(request.POST)
    judgement = submit_pairwise_judgement(
        assignment_id=assignment_id, worker=worker, choice=choice, criteria=criteria,
        rubric_scores=scores, active_seconds=active_seconds,
    )
    return f"judgement-{judgement.pk}"


def _pairwise_gold_context(item, posted):
    material = gold_material(item["content"])
    criteria = CHIRP_CRITERIA[1:] if material.criteria else ()
    questions, scores = _pairwise_questions(posted, criteria=criteria, rubric=material.rubric)
    return {
        "instance": {"instruction": material.instruction},
        "gallery": material.gallery,
        "left": material.response_1,
        "right": material.response_2,
        "questions": questions,
        "scores": scores,
        "rubric": material.rubric,
        "score_values": RUBRIC_SCORES,
    }


def _pairwise_gold_answer(posted, item):
    # Gold battles are answered "left" / "right": response_1 is always shown on the left.
    material = gold_material(item["content"])
    choice, criteria, scores = _read_pairwise(posted)
    for name in CHIRP_CRITERIA[1:] if material.criteria else ():
        if name not in criteria:
            raise AnnotationError(f"Please choose the left or the right response for "
                                  f"{name.replace('_', ' ')}.")
    if material.rubric and set(scores) != set(Side.values):
        raise AnnotationError("Please score both responses from 1 to 5.")
    return choice


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
            gold_context=_verification_gold_context,
            gold_answer=_verification_gold_answer,
        ),
        TaskPage(
            stage=Stage.PAIRWISE,
            template="annotator/pairwise.html",
            heading="Compare two responses",
            context=_pairwise_context,
            submit=_submit_pairwise,
            shortcuts=(
                ("1 / 2", "assistant 1 / assistant 2, then the next question"),
                ("1 – 5", "a score, then the next"), ("Tab", "move between questions"),
                ("Enter", "submit"),
            ),
            gold_context=_pairwise_gold_context,
            gold_answer=_pairwise_gold_answer,
            layout="wide",
        ),
    )
}

