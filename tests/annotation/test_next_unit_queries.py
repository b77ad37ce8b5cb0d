"""Round trips to the database made by the request an annotator makes most: "the next unit".

Run without the test's own transaction (`transactional_db`), so what is counted is what a
production request sends, BEGIN and COMMIT of the lease included.
"""


import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotation.models import Stage, Worker
from tests.frontend_support import caption_unit, logged_in, pairwise_unit, prolific_link, study

pytestmark = pytest.mark.django_db(transaction=True)

CAPTION = "A white cup of espresso on a red saucer, a spoon resting on the saucer, seen from above."
# The goal: the request every participant makes after every answer asks the database 6 things.
# The study; then, as one transaction (BEGIN, COMMIT), the worker with their standing and their
# progress in the study, locked against their own other requests (the browser's binding to the
# participant is a signed cookie, no query); the candidate unit with what its page shows, its
# images and the id of any lease the worker holds; the new lease, inserted only if the unit still
# has room (one statement).
STUDY_NEXT_UNIT = 6
# A reload of the page of a held lease: the held lease with its page instead of the insert.
STUDY_RELOAD = 6
# A new participant's study link (once per participant) is sent on with an arrival token: the
# study and the worker looked up, and nothing made (frontend/arrival.py).
STUDY_ARRIVAL_REDIRECT = 2
# Their first arrival with the token: the study; the worker looked up and made (BEGIN, INSERT,
# COMMIT); then, as for every next unit, BEGIN, the worker with standing and progress, locked, the
# candidate, the lease, COMMIT.
STUDY_FIRST_ARRIVAL = 10
# Django's session and its user instead of the study (the session's user must be checked
# against the database to honour a password change or a logout elsewhere).
IN_HOUSE_NEXT_UNIT = 7
IN_HOUSE_RELOAD = 7
# A battle's page shows its tournament's settings and two responses: they come with the unit too.
IN_HOUSE_PAIRWISE_NEXT_UNIT = 7


def _log(captured):
    return "\n".join(query["sql"][:140] for query in captured)


def _next_unit_and_a_reload(browser, first, answer, *, next_unit, reload, max_queries):
    """Submit `answer` to the first page, load the page the submit names (the next unit) and load
    it again (a reload of the held lease), each within its bound of queries; the next unit's page."""
    saved = browser.post("/work/submit/", {"token": first.context["token"], **answer})
    with max_queries(next_unit) as sent:
        following = browser.get(saved["Location"])
    assert following.status_code == 200, _log(sent)
    assert following.context["assignment"].unit != first.context["assignment"].unit
    with max_queries(reload) as sent:
        reloaded = browser.get(saved["Location"])
    assert reloaded.status_code == 200, _log(sent)
    assert reloaded.context["assignment"] == following.context["assignment"]
    assert reloaded.context["gallery"] == following.context["gallery"]
    return following


def test_a_study_participants_next_unit_after_a_submit_and_a_reload(django_assert_max_num_queries):
    for _ in range(3):
        caption_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION)
    browser = Client()
    first = browser.get(prolific_link(Stage.CAPTION), follow=True)
    following = _next_unit_and_a_reload(browser, first, {"caption-0": CAPTION}, next_unit=STUDY_NEXT_UNIT,
                                        reload=STUDY_RELOAD, max_queries=django_assert_max_num_queries)
    assert following.context["gallery"][0].src, "the unit's image came with it"


def test_a_new_participants_first_arrival(django_assert_max_num_queries):
    caption_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION)
    browser = Client()
    with django_assert_max_num_queries(STUDY_ARRIVAL_REDIRECT) as sent:
        sent_on = browser.get(prolific_link(Stage.CAPTION))
    assert sent_on.status_code == 302, _log(sent)
    with django_assert_max_num_queries(STUDY_FIRST_ARRIVAL) as sent:
        arrived = browser.get(sent_on["Location"])
    assert arrived.status_code == 200, _log(sent)
    assert arrived.context["assignment"].worker.external_id == "P1"


def test_an_in_house_annotators_next_unit_and_a_reload(django_assert_max_num_queries):
    for _ in range(3):
        caption_unit()
    annotator = logged_in()
    first = annotator.get(f"/work/{Stage.CAPTION}/")
    _next_unit_and_a_reload(annotator, first, {"caption-0": CAPTION}, next_unit=IN_HOUSE_NEXT_UNIT,
                            reload=IN_HOUSE_RELOAD, max_queries=django_assert_max_num_queries)


def test_an_in_house_annotators_next_battle_comes_with_its_responses_and_images(django_assert_max_num_queries):
    pairwise_unit()
    pairwise_unit(seed=1)
    annotator = logged_in()
    first = annotator.get(f"/work/{Stage.PAIRWISE}/")
    saved = annotator.post("/work/submit/", {"token": first.context["token"], "choice": "left"})
    with django_assert_max_num_queries(IN_HOUSE_PAIRWISE_NEXT_UNIT) as sent:
        following = annotator.get(saved["Location"])
    assert following.status_code == 200, _log(sent)
    assert following.context["assignment"].unit != first.context["assignment"].unit
    assert following.context["gallery"][0].src
    assert {following.context["left"], following.context["right"]} == {
        following.context["assignment"].unit.battle.response_a.text,
        following.context["assignment"].unit.battle.response_b.text}


# Tables only another stage's page shows.
NOT_A_CAPTION_PAGES = ("annotation_battle", "annotation_tournament", "annotation_modelresponse",
                       "annotation_reference")


def test_a_caption_units_next_unit_and_submit_join_no_other_stages_tables():
    """PostgreSQL plans every join of a query each time it is sent: the candidate unit of a caption
    page was planned with nine joins (3 ms of a 20 ms request) when it needs three, and a submit
    fetched the page's parts only an error page shows."""
    for _ in range(2):
        caption_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION)
    browser = Client()
    first = browser.get(prolific_link(Stage.CAPTION), follow=True)
    with CaptureQueriesContext(connection) as submitting:
        saved = browser.post("/work/submit/", {"token": first.context["token"], "caption-0": CAPTION})
    with CaptureQueriesContext(connection) as leasing:
        following = browser.get(saved["Location"])
    assert following.status_code == 200 and following.context["gallery"][0].src
    candidate = next(query["sql"] for query in leasing if "SKIP LOCKED" in query["sql"])
    # Whole statements: the joins come after the column list, past what _log keeps of each.
    submit_statements = "\n".join(query["sql"] for query in submitting)
    assert "annotation_instance" in candidate
    for table in NOT_A_CAPTION_PAGES:
        assert f'"{table}"' not in candidate, table
        assert f'"{table}"' not in submit_statements, table
