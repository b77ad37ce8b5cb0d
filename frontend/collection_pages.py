"""The collection stages' pages: instruction generation (paper Fig. 11), the
instruction-conditioned caption (Fig. 12) and verification (Figs. 13-14), each with its form."""

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from annotation.collection import captions, instructions, verification
from annotation.collection.instructions import LICENCES, MAX_IMAGES_PER_INSTRUCTION, offered_image
from annotation.exceptions import AnnotationError
from annotation.models import ImageAsset
from annotation.typed_text import CAPTION_MAX_CHARS, COMMENT_MAX_CHARS, INSTRUCTION_MAX_CHARS, field_limit
from frontend.answer_forms import AnswerForm, PostedText, TypedTextField, refusal_message
from frontend.page_parts import TaskMaterial, gallery

# --- instruction generation (paper Fig. 11) -----------------------------------------------------

_SLOT_FIELDS = ("file", "url", "licence", "author", "source")


class ImageSlotForm(forms.Form):
    """One image slot: an upload or a link, with its licence and author (checked as the domain
    checks an offered image, the message naming the slot as the page numbers it)."""

    file = forms.FileField(required=False)
    url = PostedText()
    licence = PostedText()
    author = PostedText()
    source = PostedText()

    def __init__(self, *args, number, **kwargs):
        super().__init__(*args, **kwargs)
        self.number = number

    def clean(self):
        slot = {"upload": self.cleaned_data.get("file"), "url": self.cleaned_data.get("url", ""),
                "licence": self.cleaned_data.get("licence", ""), "author": self.cleaned_data.get("author", ""),
                "source_url": self.cleaned_data.get("source", "")}
        try:
            offered_image(**slot, which=f"image {self.number}")
        except AnnotationError as error:
            raise ValidationError(str(error)) from None
        return slot


class _ImageSlots(forms.BaseFormSet):
    def __init__(self, data=None, files=None, **kwargs):
        if data is not None:
            # annotator.js adds slots without a formset's management form: the slots posted are
            # the run of indexes from 0 that any field of a slot was posted under.
            count = 0
            while count < MAX_IMAGES_PER_INSTRUCTION and any(
                    f"image-{count}-{name}" in data or f"image-{count}-{name}" in (files or {})
                    for name in _SLOT_FIELDS):
                count += 1
            data = data.copy()
            data.update({"image-TOTAL_FORMS": str(count), "image-INITIAL_FORMS": "0"})
        super().__init__(data, files, prefix="image", **kwargs)

    def get_form_kwargs(self, index):
        return {"number": index + 1}


ImageSlots = forms.formset_factory(ImageSlotForm, formset=_ImageSlots, extra=0,
                                   max_num=MAX_IMAGES_PER_INSTRUCTION, absolute_max=MAX_IMAGES_PER_INSTRUCTION)


class InstructionForm(AnswerForm):
    instruction = TypedTextField(what="The instruction", max_chars=INSTRUCTION_MAX_CHARS)

    def __init__(self, data=None, files=None, **kwargs):
        super().__init__(data, files, **kwargs)
        self.slots = ImageSlots(data, files) if data is not None else None

    def posted_slot_count(self):
        return self.slots.total_form_count() if self.slots is not None else 0

    def clean(self):
        answer = super().clean()
        if not self.slots.is_valid():
            raise ValidationError(refusal_message(*self.slots.forms) or " ".join(self.slots.non_form_errors()))
        # A slot left empty offers no image.
        answer["slots"] = [slot.cleaned_data for slot in self.slots.forms
                           if slot.cleaned_data.get("upload") or slot.cleaned_data.get("url")]
        return answer


def instruction_material(unit, assignment=None):
    return unit.family


def instruction_context(family, form):
    slot_count = 1
    if family.is_multi_image:
        seed_count = family.seedimage_set.count()
        slot_count = min(MAX_IMAGES_PER_INSTRUCTION, max(2, seed_count, form.posted_slot_count()))
    slots = [
        {
            "index": index,
            "number": index + 1,
            "url": form.shown(f"image-{index}-url"),
            "licence": form.shown(f"image-{index}-licence"),
            "author": form.shown(f"image-{index}-author"),
            "source": form.shown(f"image-{index}-source"),
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
        "instruction": form.shown("instruction"),
        "min_chars": instructions.MIN_INSTRUCTION_CHARS,
        "max_chars": INSTRUCTION_MAX_CHARS,
        "limits": {name: field_limit(ImageAsset, name) for name in ("url", "author", "source_url")},
        "allowed_hosts": settings.IMAGE_URL_ALLOWED_HOSTS,
    }


def store_instruction(*, answer, assignment_id, worker):
    instance = instructions.submit_instruction_with_images(
        assignment_id=assignment_id, worker=worker, instruction=answer["instruction"],
        slots=answer["slots"], active_seconds=answer["active_seconds"])
    return f"instance-{instance.pk}"


# --- instruction-conditioned caption (paper Fig. 12) -------------------------------------------


class CaptionForm(AnswerForm):
    """One box per image, numbered from 0 (the service checks their count against the instance)."""

    def __init__(self, data=None, files=None, **kwargs):
        super().__init__(data, files, **kwargs)
        count = 0
        while data is not None and count < MAX_IMAGES_PER_INSTRUCTION and f"caption-{count}" in data:
            count += 1
        for index in range(count):
            self.fields[f"caption-{index}"] = TypedTextField(
                what=f"The caption of image {index + 1}" if count > 1 else "The caption",
                max_chars=CAPTION_MAX_CHARS)

    def clean(self):
        answer = super().clean()
        answer["texts"] = [answer.get(name, "") for name in self.fields if name.startswith("caption-")]
        return answer


def caption_material(unit, assignment=None):
    return unit.instance


def caption_context(instance, form):
    images = gallery(instance.ordered_images())
    return {
        "instance": instance,
        "gallery": images,
        "captions": [
            {"index": index, "number": image.number, "text": form.shown(f"caption-{index}")}
            for index, image in enumerate(images)
        ],
        "min_chars": captions.MIN_CAPTION_CHARS,
        "max_chars": CAPTION_MAX_CHARS,
    }


def store_caption(*, answer, assignment_id, worker):
    caption = captions.submit_caption(assignment_id=assignment_id, worker=worker, texts=answer["texts"],
                                      active_seconds=answer["active_seconds"])
    return f"caption-{caption.pk}"


# --- verification (paper Figs. 13-14) ----------------------------------------------------------

_VERDICT_NEEDED = "Please say whether the response is correct or incorrect."
_PROBLEM_NEEDED = "Please say where the problem is: in the caption, the response, or both."
_PROBLEMS = {"caption": (True, False), "response": (False, True), "both": (True, True)}


class VerificationForm(AnswerForm):
    verdict = forms.ChoiceField(choices=[("correct", "Correct"), ("incorrect", "Incorrect")],
                                error_messages={"required": _VERDICT_NEEDED, "invalid_choice": _VERDICT_NEEDED})
    problem = forms.ChoiceField(choices=[(name, name) for name in _PROBLEMS], required=False,
                                error_messages={"invalid_choice": _PROBLEM_NEEDED})
    harmful = forms.ChoiceField(choices=[("yes", "yes")], required=False, error_messages={
        "invalid_choice": "Please tick the box if the response or image is harmful, or leave it empty."})
    comment = TypedTextField(what="The comment", max_chars=COMMENT_MAX_CHARS)

    def clean(self):
        answer = super().clean()
        answer["is_correct"] = answer.get("verdict") == "correct"
        in_caption, in_response = False, False
        if answer.get("verdict") == "incorrect":
            if not answer.get("problem"):
                raise ValidationError(_PROBLEM_NEEDED)
            in_caption, in_response = _PROBLEMS[answer["problem"]]
        answer["problem_in_caption"], answer["problem_in_response"] = in_caption, in_response
        return answer


def verification_material(unit, assignment=None):
    reference = unit.reference
    instance = unit.instance
    caption = reference.caption or instance.current_caption
    return TaskMaterial(instruction=instance.instruction, gallery=gallery(instance.ordered_images()),
                        captions=list(caption.texts) if caption else [], response=reference.text)


def verification_context(material, form):
    return {
        "instance": {"instruction": material.instruction},
        "gallery": material.gallery,
        "caption_texts": [{"number": number, "text": text}
                          for number, text in enumerate(material.captions, start=1)],
        "reference": {"text": material.response},
        "verdict": form.shown("verdict"),
        "problem": form.shown("problem"),
        "harmful": form.shown("harmful") == "yes",
        "comment": form.shown("comment"),
        "comment_max_chars": COMMENT_MAX_CHARS,
    }


def store_verification(*, answer, assignment_id, worker):
    stored = verification.submit_verification(
        assignment_id=assignment_id, worker=worker, is_correct=answer["is_correct"],
        problem_in_caption=answer["problem_in_caption"], problem_in_response=answer["problem_in_response"],
        is_harmful=answer["harmful"] == "yes", comment=answer["comment"],
        active_seconds=answer["active_seconds"],
    )
    return f"verification-{stored.pk}"


def verification_gold_answer(answer):
    # Gold verification items are answered "correct" / "incorrect" (their options).
    return answer["verdict"]
