"""Round trips to the database made by the request an annotator makes most: "the next unit".

Run without the test's own transaction (`transactional_db`), so what is counted is what a
production request sends, BEGIN and COMMIT of the lease included.
"""


import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotation.models import Stage, Worker
from tests.frontend_support import caption_unit, logged_in, prolific_link, study

pytestmark = pytest.mark.django_db(transaction=True)

CAPTION = "A white cup of espresso on a red saucer, a spoon resting on the saucer, seen from above."
# The study; the worker with their standing for the stage and their progress in the study (the
# browser's binding to the participant is a signed cookie, no query); then, as one transaction
# (BEGIN, COMMIT), the worker's lock, their held lease, the candidate unit with what its page
# shows, the new lease inserted only if the unit still has room (one statement); then the unit's
# images.
STUDY_NEXT_UNIT = 9
# The session and its user; the worker with their standing; the lease as above; the images.
IN_HOUSE_NEXT_UNIT = 10
# A reload of the page of a held lease: the same, without the candidate and the insert.
IN_HOUSE_RELOAD = 8


def _round_trips(request):
    with CaptureQueriesContext(connection) as sent:
        response = request()
    assert response.status_code == 200
    return response, len(sent), "\n".join(query["sql"][:140] for query in sent)


def test_a_study_participants_next_unit_after_a_submit():
    for _ in range(3):
        caption_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION)
    browser = Client()
    first = browser.get(prolific_link(Stage.CAPTION))
    saved = browser.post("/work/submit/", {"token": first.context["token"], "caption-0": CAPTION})
    following, sent, log = _round_trips(lambda: browser.get(saved["Location"]))
    assert following.context["assignment"].unit != first.context["assignment"].unit
    assert sent <= STUDY_NEXT_UNIT, log


def test_an_in_house_annotators_next_unit_and_a_reload():
    for _ in range(3):
        caption_unit()
    annotator = logged_in()
    first = annotator.get(f"/work/{Stage.CAPTION}/")
    saved = annotator.post("/work/submit/", {"token": first.context["token"], "caption-0": CAPTION})
    following, sent, log = _round_trips(lambda: annotator.get(saved["Location"]))
    assert following.context["assignment"].unit != first.context["assignment"].unit
    assert sent <= IN_HOUSE_NEXT_UNIT, log
    reloaded, sent, log = _round_trips(lambda: annotator.get(saved["Location"]))
    assert reloaded.context["assignment"] == following.context["assignment"]
    assert sent <= IN_HOUSE_RELOAD, log
