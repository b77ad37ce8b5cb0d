"""Annotator answers are read by one form per stage (frontend/answer_forms.py): whatever is posted
(fields missing, values no option names, text far over its cap, ids that name nothing) the answer is
refused with a message for the worker, shown on the page again with what they typed, and never a
server error; a live gold item is read by the same form as the stage's units."""

import pytest
from django.test import Client

from annotation.models import (
    Caption,
    GoldAnswer,
    GoldItem,
    HumanJudgement,
    Instance,
    QualificationAttempt,
    Stage,
    Verification,
    Worker,
    WorkerQualification,
)
from tests.frontend_support import (
    accept,
    caption_unit,
    instruction_unit,
    logged_in,
    pairwise_unit,
    qualification_test,
    study,
    unit_url,
    verification_unit,
)

pytestmark = pytest.mark.django_db

JSON = {"Accept": "application/json"}
HUGE = "x" * 1_000_000
INSTRUCTION = "Why is the cat sitting so still? What might it be watching outside?"
GOOD_IMAGE = {"image-0-url": "https://upload.wikimedia.org/wikipedia/commons/cat.jpg",
              "image-0-licence": "CC0 1.0", "image-0-author": "A. Photographer"}


def post(token, fields, *, as_json=True, browser=None):
    return (browser or Client()).post("/work/submit/", {"token": token, **fields},
                                      headers=JSON if as_json else {})


def refused(response):
    assert response.status_code == 400, response.content[:300]
    message = response.json()["error"]
    assert message.strip()
    return message


def answers_stored():
    return (Instance.objects.filter(author__isnull=False).count(), Caption.objects.count(),
            Verification.objects.count(), HumanJudgement.objects.count())


BAD_ANSWERS = [
    (instruction_unit, {}),
    (instruction_unit, {"instruction": HUGE, **GOOD_IMAGE}),
    (instruction_unit, {"instruction": INSTRUCTION, **GOOD_IMAGE, "image-0-licence": "All rights reserved"}),
    (instruction_unit, {"instruction": INSTRUCTION, "image-0-url": "https://example.org/a.jpg",
                        "image-0-author": HUGE}),
    (instruction_unit, {"instruction": INSTRUCTION, "image-0-file": "not a file"}),
    (caption_unit, {}),
    (caption_unit, {"caption-0": HUGE}),
    (caption_unit, {"caption-0": "A cup.\x00"}),
    (caption_unit, {"caption-1": "A white cup of coffee on a red saucer, seen from above, a spoon beside it."}),
    (verification_unit, {}),
    (verification_unit, {"verdict": "maybe"}),
    (verification_unit, {"verdict": "incorrect"}),
    (verification_unit, {"verdict": "incorrect", "problem": "everything"}),
    (verification_unit, {"verdict": "correct", "harmful": "sometimes"}),
    (verification_unit, {"verdict": "correct", "comment": HUGE}),
    (lambda: pairwise_unit(with_criteria=True, with_rubric=True), {}),
    (lambda: pairwise_unit(with_criteria=True, with_rubric=True), {"choice": "up"}),
    (lambda: pairwise_unit(with_criteria=True, with_rubric=True),
     {"choice": "left", "criterion-detail": "middle", "score-left": "9", "score-right": HUGE}),
    (lambda: pairwise_unit(), {"choice": "left", "criterion-no-such-thing": "left", "score-left": "nine"}),
]


@pytest.mark.parametrize(("make_unit", "fields"), BAD_ANSWERS)
def test_a_bad_answer_is_refused_with_a_message_and_nothing_is_stored(make_unit, fields):
    token = accept(Client(), make_unit()).context["token"]
    before = answers_stored()
    refused(post(token, fields))
    assert answers_stored() == before
    page = post(token, fields, as_json=False)
    assert page.status_code == 400 and page.context["error"]


def test_a_refused_page_shows_the_workers_input_again_escaped():
    token = accept(Client(), verification_unit()).context["token"]
    comment = "<b>bold</b> " + "c" * 2_001
    page = post(token, {"verdict": "incorrect", "problem": "caption", "comment": comment}, as_json=False)
    assert page.status_code == 400
    html = page.content.decode()
    assert "2,000" in html and "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html
    assert (page.context["verdict"], page.context["problem"], page.context["comment"]) == (
        "incorrect", "caption", comment)


def test_a_live_gold_item_is_read_by_the_same_form_as_the_stages_units():
    qualification = qualification_test(live_gold_every=1)
    worker = Worker.objects.create(platform=Worker.Platform.MTURK, external_id="AGOLD")
    WorkerQualification.objects.create(qualification=qualification, worker=worker, test_score="1.000")
    unit = verification_unit()
    gold = Client().get(unit_url(unit, worker_id="AGOLD"))
    assert gold.context["config"]["draftKey"].startswith("task-"), "a gold item, not the unit"
    verification_unit()
    # An in-house annotator's page of a unit: they are shown no gold items.
    annotator = logged_in()
    task = annotator.get(f"/work/{Stage.VERIFICATION}/")
    assert task.context["assignment"] is not None
    before = answers_stored()
    for fields in ({"verdict": "maybe"}, {"verdict": "incorrect", "problem": "everything"},
                   {"verdict": "correct", "comment": HUGE}):
        unit_message = refused(post(task.context["token"], fields, browser=annotator))
        assert refused(post(gold.context["token"], fields)) == unit_message
    assert not GoldAnswer.objects.exists() and answers_stored() == before


def test_a_gold_battle_that_asks_the_criteria_and_the_rubric_needs_them_all():
    qualification = qualification_test(stage=Stage.PAIRWISE, live_gold_every=1)
    GoldItem.objects.filter(qualification=qualification).update(content={
        "instruction": "Which response counts the cups right?", "response_1": "Two cups.",
        "response_2": "Three cups.", "criteria": True, "rubric": "5: counts every cup."},
        options=["left", "right"], answer="left")
    worker = Worker.objects.create(platform=Worker.Platform.MTURK, external_id="AGOLD")
    WorkerQualification.objects.create(qualification=qualification, worker=worker, test_score="1.000")
    gold = Client().get(unit_url(pairwise_unit(), worker_id="AGOLD"))
    token = gold.context["token"]
    assert "for relevance and completeness" in refused(post(token, {"choice": "left"}))
    everything = {"choice": "left", **{f"criterion-{name}": "left" for name in (
        "relevance_and_completeness", "understanding_and_reasoning", "hallucination", "detail")}}
    assert "score both" in refused(post(token, everything))
    assert post(token, {**everything, "score-left": "5", "score-right": "2"}).status_code == 200
    assert GoldAnswer.objects.get().correct


def test_qualification_answers_over_their_cap_are_refused_and_unknown_items_are_ignored():
    qualification_test(stage=Stage.CAPTION)
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION)
    browser = Client()
    test = browser.get(f"/work/qualify/{Stage.CAPTION}/?PROLIFIC_PID=P1&STUDY_ID=STUDY123", follow=True)
    items = [item["name"] for item in test.context["items"]]
    token = test.context["token"]
    response = browser.post(f"/work/qualify/{Stage.CAPTION}/", {"token": token, items[0]: HUGE}, headers=JSON)
    assert "question 1" in refused(response)
    again = browser.post(f"/work/qualify/{Stage.CAPTION}/", {"token": token, items[1]: "correct", items[0]: HUGE})
    assert again.status_code == 400
    assert [item["options"][0]["checked"] for item in again.context["items"][:2]] == [False, True]
    assert QualificationAttempt.objects.get().status == QualificationAttempt.Status.STARTED
    # Ids of no item of the test, and a text no option of the item names, answer nothing.
    unanswered = browser.post(f"/work/qualify/{Stage.CAPTION}/",
                              {"token": token, "item-999999999": "correct", "item-x": "y", items[0]: "perhaps"},
                              headers=JSON)
    assert "(5 left)" in refused(unanswered)
