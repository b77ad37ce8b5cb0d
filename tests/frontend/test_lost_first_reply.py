"""A new participant's first reply lost (issue 38, item 4): the study link sends a new participant on
with a signed arrival token, and the request that brings it makes their row. When that request's
reply is lost after the row committed, the browser still has the address with the token; loading it
again lets them in as the same participant without asking the platform. A second browser with only
the participant id, or with a token of its own, is refused as before, and a token too old or altered
is refused with its reason.

"The reply lost" is the browser never seeing the response: the cookies it set are not kept, and
what the browser still has is the address it was loading and the cookies of the redirect before it.
That address is good only in the browser it was given to: another browser loading it is refused.
"""

import time
from types import SimpleNamespace
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.core import signing
from django.test import Client

from annotation.models import Assignment, Stage, Worker
from frontend.arrival import ARRIVAL_EXPIRED, ARRIVAL_FORGED, ARRIVAL_PARAMETER, PARTICIPANTS_COOKIE
from mturk.identity import STUDY_NOT_CONFIRMED
from mturk.participants import ARRIVAL_ELSEWHERE
from tests.frontend_support import caption_unit, prolific_link, study

pytestmark = pytest.mark.django_db

LINK = prolific_link(Stage.CAPTION, participant="5f1a2b3c4d5e6f7a8b9c0d1e")


@pytest.fixture(autouse=True)
def caption_study():
    for _ in range(3):
        caption_unit()
    return study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION)


def sent_on(browser, link=LINK):
    """The address a new participant's study link redirects their browser to."""
    response = browser.get(link)
    assert response.status_code == 302, response.content[:300]
    return response["Location"]


def lose_the_reply(browser, reply):
    for name in reply.cookies:
        browser.cookies.pop(name, None)


def participants():
    return Worker.objects.filter(platform=Worker.Platform.PROLIFIC)


def test_a_new_participants_study_link_is_sent_on_with_an_arrival_token_and_nothing_is_made():
    location = sent_on(Client())
    address = urlsplit(location)
    query = parse_qs(address.query)
    assert address.path == f"/work/{Stage.CAPTION}/"
    assert query["PROLIFIC_PID"] == ["5f1a2b3c4d5e6f7a8b9c0d1e"] and query["SESSION_ID"] == ["S1"]
    assert query[ARRIVAL_PARAMETER][0]
    assert not participants().exists() and not Assignment.objects.exists()


@pytest.mark.parametrize("platform_api", ["down", "not configured"])
def test_a_first_reply_lost_is_retried_from_the_same_browser_as_the_same_participant_and_task(
        platform_api, prolific, settings):
    if platform_api == "down":
        prolific.stop()
    else:
        settings.PROLIFIC_API_TOKEN = ""
    browser = Client()
    location = sent_on(browser)
    first = browser.get(location)
    assert first.status_code == 200
    lose_the_reply(browser, first)

    again = browser.get(location)

    assert again.status_code == 200, again.content[:300]
    assert participants().count() == 1
    assert again.context["assignment"].worker_id == first.context["assignment"].worker_id
    assert again.context["assignment"].pk == first.context["assignment"].pk  # the task it was given
    assert Assignment.objects.count() == 1
    assert PARTICIPANTS_COOKIE in again.cookies  # this browser holds the participant now
    assert again["Referrer-Policy"] == "same-origin"  # the token's address is not sent off the site
    assert prolific.requests == []  # the platform was never asked
    assert browser.get(LINK).status_code == 200  # and the plain study link opens for it


def test_a_second_browser_with_only_the_participant_id_is_refused_as_before():
    browser = Client()
    browser.get(sent_on(browser))

    other = Client().get(LINK)

    assert other.status_code == 403
    assert STUDY_NOT_CONFIRMED in other.content.decode()
    assert participants().count() == 1 and Assignment.objects.count() == 1


def test_a_second_browser_with_an_arrival_token_of_its_own_is_refused_as_before():
    # Someone with the id takes a token before the participant arrives and uses it after.
    early = Client()
    taken_early = sent_on(early)
    participant = Client()
    assert participant.get(sent_on(participant)).status_code == 200

    other = early.get(taken_early)

    assert other.status_code == 403
    assert STUDY_NOT_CONFIRMED in other.content.decode()
    assert Assignment.objects.count() == 1


@pytest.mark.parametrize("when", ["while the first browser works", "after it finished"])
def test_the_address_with_the_token_opened_in_another_browser_shows_nothing_of_the_participant(when, prolific):
    browser = Client()
    location = sent_on(browser)
    task = browser.get(location)
    assert task.status_code == 200
    if when == "after it finished":
        caption = "A cup of hot coffee with steam rising from it on a wooden table."
        submitted = browser.post("/work/submit/", {"token": task.context["token"], "caption-0": caption})
        assert submitted.status_code == 302
        assert browser.post("/work/finish/", {"session": task.context["session_token"]}).status_code == 200

    other = Client().get(location)  # copied out of the address bar, shared, read over a shoulder

    assert other.status_code == 403
    page = other.content.decode()
    assert ARRIVAL_ELSEWHERE in page and "C0DE42" not in page
    assert "assignment" not in (other.context or {})
    assert Assignment.objects.count() == 1 and participants().count() == 1
    assert prolific.requests  # the platform was asked, and does not confirm the claim


def test_an_expired_arrival_token_is_refused_with_its_reason(monkeypatch):
    browser = Client()
    with monkeypatch.context() as an_hour_ago:
        an_hour_ago.setattr(signing, "time", SimpleNamespace(time=lambda: time.time() - 3600))
        location = sent_on(browser)
        first = browser.get(location)
        assert first.status_code == 200
    lose_the_reply(browser, first)

    again = browser.get(location)

    assert again.status_code == 403
    assert ARRIVAL_EXPIRED in again.content.decode()
    assert participants().count() == 1 and Assignment.objects.count() == 1


def with_token(location, token):
    address = urlsplit(location)
    query = {name: values[0] for name, values in parse_qs(address.query).items()}
    query[ARRIVAL_PARAMETER] = token
    return f"{address.path}?{urlencode(query)}"


@pytest.mark.parametrize("altered", ["signature", "another participant's token"])
def test_an_altered_arrival_token_is_refused_with_its_reason(altered):
    browser = Client()
    location = sent_on(browser)
    first = browser.get(location)
    assert first.status_code == 200
    lose_the_reply(browser, first)
    token = parse_qs(urlsplit(location).query)[ARRIVAL_PARAMETER][0]
    if altered == "signature":
        forged = with_token(location, token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"))
    else:
        forged = with_token(location, parse_qs(urlsplit(sent_on(
            Client(), prolific_link(Stage.CAPTION, participant="SOMEONEELSE"))).query)[ARRIVAL_PARAMETER][0])

    again = browser.get(forged)

    assert again.status_code == 403
    assert ARRIVAL_FORGED in again.content.decode()
    assert participants().count() == 1


def test_an_expired_token_the_platform_confirms_still_lets_the_participant_in(monkeypatch, prolific):
    prolific.submissions["S1"] = {"id": "S1", "participant_id": "5f1a2b3c4d5e6f7a8b9c0d1e",
                                  "study_id": "STUDY123", "status": "ACTIVE"}
    browser = Client()
    with monkeypatch.context() as an_hour_ago:
        an_hour_ago.setattr(signing, "time", SimpleNamespace(time=lambda: time.time() - 3600))
        location = sent_on(browser)
        first = browser.get(location)
    lose_the_reply(browser, first)

    assert browser.get(location).status_code == 200
    assert participants().count() == 1


def test_a_bad_token_on_an_id_not_seen_yet_is_sent_on_with_a_fresh_one():
    location = sent_on(Client())
    forged = with_token(location, "not-a-token")

    response = Client().get(forged)

    assert response.status_code == 302
    fresh = parse_qs(urlsplit(response["Location"]).query)[ARRIVAL_PARAMETER]
    assert fresh != ["not-a-token"]
    assert not participants().exists()


def test_the_browser_that_holds_the_participant_may_reload_an_old_token_address(monkeypatch):
    browser = Client()
    with monkeypatch.context() as an_hour_ago:
        an_hour_ago.setattr(signing, "time", SimpleNamespace(time=lambda: time.time() - 3600))
        location = sent_on(browser)
        assert browser.get(location).status_code == 200

    assert browser.get(location).status_code == 200  # its cookie says who it is; the token is not read
