"""Issue 10.4 (typed text): whatever a worker types, the answer is a form error with a message,
never a server error, and nothing is stored. Every field's length is checked before the save and
the caps are stated on the page (issue 10.7: no length cap on worker text)."""

import pytest
from django.test import Client

from annotation.models import Caption, ImageAsset, Instance, Verification
from annotation.typed_text import CAPTION_MAX_CHARS, COMMENT_MAX_CHARS, INSTRUCTION_MAX_CHARS
from tests.frontend_support import caption_unit, instruction_unit, unit_url, verification_unit

pytestmark = pytest.mark.django_db

INSTRUCTION = "Why is the cat sitting so still? What might it be watching outside?"
CAPTION = "A white cup of coffee with latte art in the shape of a heart, steam rising, on a saucer."
LONG_URL = "https://upload.wikimedia.org/wikipedia/commons/" + "a" * 1200 + ".jpg"
GOOD_IMAGE = {"image-0-url": "https://upload.wikimedia.org/wikipedia/commons/cat.jpg",
              "image-0-licence": "CC0 1.0", "image-0-author": "A. Photographer",
              "image-0-source": "https://commons.wikimedia.org/wiki/File:Cat.jpg"}


def opened(unit):
    page = Client().get(unit_url(unit, assignment_id=f"3ASG{unit.pk:08d}"))
    assert page.status_code == 200
    return page


def post(token, fields, *, as_json=True):
    headers = {"Accept": "application/json"} if as_json else {}
    return Client().post("/work/submit/", {"token": token, **fields}, headers=headers)


def assert_refused(response, *words):
    assert response.status_code == 400, response.content[:300]
    message = response.json()["error"]
    for word in words:
        assert word in message
    return message


@pytest.mark.parametrize(("fields", "words"), [
    ({"instruction": INSTRUCTION, **GOOD_IMAGE, "image-0-url": LONG_URL}, ["link of image 1", "1,000"]),
    ({"instruction": INSTRUCTION, **GOOD_IMAGE, "image-0-author": "N" * 301}, ["author of image 1", "300"]),
    ({"instruction": INSTRUCTION, **GOOD_IMAGE,
      "image-0-source": "https://commons.wikimedia.org/" + "w" * 1000}, ["source page of image 1"]),
    ({"instruction": INSTRUCTION.replace("cat", "cat\x00"), **GOOD_IMAGE}, ["instruction", "U+0000"]),
    ({"instruction": INSTRUCTION, **GOOD_IMAGE, "image-0-author": "Ann\x00"}, ["author", "U+0000"]),
    ({"instruction": INSTRUCTION, **GOOD_IMAGE, "image-0-author": "Ann\nBob"}, ["author", "U+000A"]),
    ({"instruction": INSTRUCTION, **GOOD_IMAGE,
      "image-0-url": "https://upload.wikimedia.org/x\x00.jpg"}, ["link", "U+0000"]),
    ({"instruction": "x" * (INSTRUCTION_MAX_CHARS + 1), **GOOD_IMAGE}, ["instruction", "2,000"]),
    ({"instruction": INSTRUCTION + "\x1b[31m", **GOOD_IMAGE}, ["instruction", "U+001B"]),
])
def test_instruction_page_refuses_bad_typed_text_with_a_message(fields, words):
    unit = instruction_unit()
    token = opened(unit).context["token"]
    assert_refused(post(token, fields), *words)
    assert not Instance.objects.exclude(pk__in=[]).filter(author__isnull=False).exists()
    assert not ImageAsset.objects.filter(uploaded_by__isnull=False).exists()
    # The same fields accepted once fixed: nothing was half stored.
    assert post(token, {"instruction": INSTRUCTION, **GOOD_IMAGE}).json()["ok"]


def test_without_javascript_the_refusal_is_the_page_again_with_the_message_and_the_text():
    unit = instruction_unit()
    token = opened(unit).context["token"]
    response = post(token, {"instruction": INSTRUCTION + "\x00", **GOOD_IMAGE}, as_json=False)
    assert response.status_code == 400
    html = response.content.decode()
    assert "U+0000" in html and "A. Photographer" in html


@pytest.mark.parametrize(("text", "words"), [
    (CAPTION + "\x00", ["caption", "U+0000"]),
    (CAPTION + "\x7f", ["caption", "U+007F"]),
    ("A white cup\u0085" + CAPTION, ["caption", "U+0085"]),
    ("a" * (CAPTION_MAX_CHARS + 1), ["caption", "5,000"]),
])
def test_caption_refuses_control_characters_and_text_over_its_cap(text, words):
    unit = caption_unit()
    token = opened(unit).context["token"]
    assert_refused(post(token, {"caption-0": text}), *words)
    assert not Caption.objects.exists()


def test_caption_keeps_line_breaks_and_tabs():
    unit = caption_unit()
    token = opened(unit).context["token"]
    assert post(token, {"caption-0": CAPTION + "\r\n\tThe saucer is white."}).json()["ok"]


@pytest.mark.parametrize(("comment", "words"), [
    ("Looks wrong\x00", ["comment", "U+0000"]),
    ("c" * (COMMENT_MAX_CHARS + 1), ["comment", "2,000"]),
])
def test_verification_comment_is_checked_before_the_save(comment, words):
    unit = verification_unit()
    token = opened(unit).context["token"]
    assert_refused(post(token, {"verdict": "correct", "comment": comment}), *words)
    assert not Verification.objects.exists()


def test_every_page_states_its_caps():
    pages = {
        instruction_unit(): ["at most 2000 characters"],
        caption_unit(): ["at most 5000 characters"],
        verification_unit(): ["at most 2000 characters"],
    }
    for unit, phrases in pages.items():
        html = opened(unit).content.decode()
        for phrase in phrases:
            assert phrase in html


def test_a_free_text_qualification_answer_with_a_nul_is_a_form_error():
    from annotation.models import GoldItem, QualificationAttempt, Stage, StageQualification, Worker
    from tests.frontend_support import study

    qualification = StageQualification.objects.create(stage=Stage.CAPTION, name="Captions",
                                                      test_size=5, description="Five captions.")
    for n in range(5):
        GoldItem.objects.create(qualification=qualification, kind=GoldItem.Kind.FREE_TEXT,
                                content={"instruction": f"Describe cup {n}."}, question="Your caption?",
                                answer="A cup.")
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION)
    browser = Client()
    test = browser.get(f"/work/qualify/{Stage.CAPTION}/?PROLIFIC_PID=P1&STUDY_ID=STUDY123", follow=True)
    assert test.status_code == 200
    item = test.context["items"][0]["name"]
    response = browser.post(f"/work/qualify/{Stage.CAPTION}/",
                            {"token": test.context["token"], item: "A cup\x00"},
                            headers={"Accept": "application/json"})
    assert_refused(response, "U+0000")
    assert QualificationAttempt.objects.get().status == QualificationAttempt.Status.STARTED
