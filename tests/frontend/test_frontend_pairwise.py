"""Page 4, pairwise preference, through Django's test client: sides, criteria, rubric, escaping."""

import re
from html import unescape

import pytest
from django.test import Client

from annotation.models import Assignment, HumanJudgement, Side, Tournament, WorkUnit
from tests.frontend_support import (
    LONG_RESPONSE,
    RUBRIC,
    XSS_RESPONSE,
    accept,
    pairwise_unit,
    preview_url,
)
from tests.paths import SEEDS

pytestmark = pytest.mark.django_db

SHORT = "The cat is watching a bird outside the window."


def submit(token, **fields):
    return Client().post("/work/submit/", {"token": token, **fields},
                         headers={"Accept": "application/json"})


def test_the_server_draws_the_sides_and_a_reload_shows_the_same_ones():
    unit = pairwise_unit(left_text=SHORT, right_text=LONG_RESPONSE)
    first = accept(Client(), unit).context
    again = accept(Client(), unit).context
    assert Assignment.objects.count() == 1
    assert (first["left"], first["right"]) == (again["left"], again["right"])
    assert {first["left"], first["right"]} == {SHORT, LONG_RESPONSE}


def test_sides_differ_between_assignments_of_the_same_battle():
    # Across workers the draw is per assignment, so both orders occur.
    seen = set()
    for n in range(12):
        unit = pairwise_unit(left_text=SHORT, right_text=LONG_RESPONSE, seed=n)
        seen.add(accept(Client(), unit, worker_id=f"AW{n}", assignment_id=f"ASG{n}").context["left"])
    assert seen == {SHORT, LONG_RESPONSE}


@pytest.mark.parametrize("choice", [Side.LEFT, Side.RIGHT])
def test_the_stored_judgement_names_the_response_that_was_shown_on_the_chosen_side(choice):
    unit = pairwise_unit(left_text=SHORT, right_text=LONG_RESPONSE)
    context = accept(Client(), unit).context
    response = submit(context["token"], choice=choice)
    assert response.status_code == 200, response.content
    judgement = HumanJudgement.objects.select_related("battle__response_a").get()
    battle = judgement.battle
    shown = context["left"] if choice == Side.LEFT else context["right"]
    winner = battle.response_a if judgement.winner_side(choice) == "model_a" else battle.response_b
    assert winner.text == shown
    assert judgement.shown_left == ("a" if context["left"] == battle.response_a.text else "b")


def test_the_page_and_the_submission_find_the_battle_through_the_unit_not_its_key():
    unit = pairwise_unit(left_text=SHORT, right_text=LONG_RESPONSE)
    battle = unit.battle
    # The key only keeps units from being made twice; nothing reads the battle out of it.
    WorkUnit.objects.filter(pk=unit.pk).update(key="any name at all")
    context = accept(Client(), unit).context
    assert {context["left"], context["right"]} == {battle.response_a.text, battle.response_b.text}
    assert submit(context["token"], choice=Side.LEFT).status_code == 200
    assert HumanJudgement.objects.get().battle == battle


def test_criteria_and_rubric_scores_are_asked_and_stored_per_shown_side():
    unit = pairwise_unit(with_criteria=True, with_rubric=True)
    page = accept(Client(), unit)
    html = unescape(page.content.decode())
    for title, question in chirp_survey_questions():
        assert f">{title}</legend>" in html
        assert f">{question}</p>" in html
    assert "Score 5: every claim is visible in the image." in html
    assert page.context["rubric"] == RUBRIC
    token = page.context["token"]
    missing = submit(token, choice="left", **{"criterion-detail": "left"})
    assert missing.status_code == 400
    assert "relevance and completeness" in missing.json()["error"]
    response = submit(token, choice="left", **{
        "criterion-relevance_and_completeness": "left",
        "criterion-understanding_and_reasoning": "right",
        "criterion-hallucination": "left", "criterion-detail": "right",
        "score-left": "4", "score-right": "2"})
    assert response.status_code == 200, response.content
    judgement = HumanJudgement.objects.get()
    assert judgement.criteria == {"relevance_and_completeness": "left",
                                  "understanding_and_reasoning": "right",
                                  "hallucination": "left", "detail": "right"}
    assert judgement.rubric_scores == {"left": 4, "right": 2}


def chirp_survey_questions():
    """The five criteria as CHIRP's survey showed them (Appendix C.2.1, Fig. 19), from the paper."""
    text = SEEDS / "004_eb2ff90e44e08a9d.txt"
    assert text.exists(), f"CHIRP's paper ({text}) is not beside the project"
    pattern = re.compile(r"^(Overall Preference|Relevance and Completeness Evaluation|Understanding and "
                         r"Reasoning|Hallucination Evaluation|Detail Evaluation): (Which .*\?)$", re.M)
    found = dict(pattern.findall(text.read_text()))
    assert len(found) == 5
    return list(found.items())


def test_a_rubric_tournament_whose_rubric_is_empty_asks_for_no_scores_and_accepts_the_choice():
    unit = pairwise_unit(with_rubric=True)
    Tournament.objects.update(rubric="")
    page = accept(Client(), unit)
    assert "score-left" not in page.content.decode()
    response = submit(page.context["token"], choice="right")
    assert response.status_code == 200, response.content
    assert HumanJudgement.objects.get().rubric_scores == {}


def test_a_tournament_without_criteria_shows_only_the_overall_choice():
    unit = pairwise_unit()
    html = accept(Client(), unit).content.decode()
    assert 'name="choice"' in html
    assert "criterion-" not in html and "score-left" not in html


def test_refused_answer_without_javascript_keeps_the_choices_made():
    unit = pairwise_unit(with_criteria=True)
    token = accept(Client(), unit).context["token"]
    response = Client().post("/work/submit/", {"token": token, "choice": "right",
                                               "criterion-hallucination": "left"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'name="choice" value="right" data-shortcut="2" checked' in html
    assert 'name="criterion-hallucination" value="left" required data-shortcut="1" checked' in html
    assert not HumanJudgement.objects.exists()


def test_preview_shows_the_battle_read_only_and_leases_nothing():
    unit = pairwise_unit(left_text=SHORT, right_text=LONG_RESPONSE)
    response = Client().get(preview_url(unit))
    assert response.status_code == 200
    assert b'<fieldset class="plain" disabled>' in response.content
    assert not Assignment.objects.exists()


def test_model_responses_are_escaped():
    unit = pairwise_unit(left_text=XSS_RESPONSE, right_text=XSS_RESPONSE + " (2)")
    html = accept(Client(), unit).content.decode()
    assert "<script>window.__xss" not in html
    assert "<img src=x" not in html and 'href="javascript:' not in html
    assert "&lt;script&gt;window.__xss=4&lt;/script&gt;" in html


def test_pairwise_page_is_small_and_takes_few_queries(django_assert_max_num_queries):
    from django.contrib.staticfiles import finders

    unit = pairwise_unit(with_criteria=True, with_rubric=True)
    accept(Client(), unit)
    # Three of these check the HIT and the (assignmentId, workerId) binding (issue 10.1).
    with django_assert_max_num_queries(17):
        html = accept(Client(), unit).content
    assets = sum(len(open(finders.find(f"frontend/annotator.{ext}"), "rb").read())
                 for ext in ("css", "js"))
    # The long response is test data; the page's own weight stays well under 100 KB.
    assert len(html) - len(LONG_RESPONSE) + assets < 60_000
