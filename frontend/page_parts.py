"""What every annotator stage page is made of: the image gallery with licences, the material a task
shows (from a unit or a gold item), and the description of a stage's page (StagePage)."""

from collections.abc import Callable
from dataclasses import dataclass, field

from annotation.image_urls import image_url_allowed
from annotation.models import Instance


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


# --- what a verification or pairwise page shows, from a unit or from a gold item -----------------


@dataclass(frozen=True)
class TaskMaterial:
    """What a task page shows, read from a unit or from a live gold item (one page for both).

    A gold item's content (annotation.GoldItem) may name an `instance` (its instruction, images,
    caption and reference are then the defaults) and give any of `instruction`, `image_url` /
    `image_urls`, `caption` (text or a list, one per image), `response` (verification),
    `response_1` / `response_2` (pairwise, shown left / right), `criteria` (true: ask CHIRP's
    criteria too) and `rubric`.
    """

    instruction: str
    gallery: list
    captions: list = field(default_factory=list)
    response: str = ""
    response_1: str = ""
    response_2: str = ""
    criteria: bool = False
    rubric: str = ""


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
    return TaskMaterial(
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
class StagePage:
    stage: str
    template: str
    heading: str
    material: Callable
    """material(unit, assignment) -> what the page shows of a unit; `assignment` is None in an MTurk
    preview."""
    form: type
    """The stage's form (frontend/answer_forms.py), read alike for a unit and a gold item:
    form(data, files, shown=material)."""
    context: Callable
    """context(material, form) -> the template's context; the form, bound to a refused answer, is
    shown again as posted."""
    store: Callable
    """store(answer=, assignment_id=, worker=) -> the stored answer's label; `answer` is the
    form's cleaned data."""
    shortcuts: tuple = field(default=())
    """(keys, what they do), listed on the page; the keys themselves are declared in the form."""
    gold_answer: Callable | None = None
    """gold_answer(answer) -> the answer compared with a live gold item's; a stage without one
    shows no gold items. Its material is the gold item's (gold_material)."""
    layout: str = ""
    """A modifier of the task layout: "wide" gives the material more room than the form."""

    @property
    def shows_gold(self):
        return self.gold_answer is not None
