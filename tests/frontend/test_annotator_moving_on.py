"""Issue 9.9: an annotator can give a task back (its slot is free at once) and move on, sees that a
submit was saved, and an in-house annotator can log out. Swagger UI is served from our own files."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from annotation.crowdwork.queue import next_assignment
from annotation.models import Assignment, Stage, Worker
from tests.frontend_support import (
    caption_unit,
    logged_in,
    prolific_link,
    study,
    unit_url,
    verification_unit,
)

pytestmark = pytest.mark.django_db

CAPTION = "A white cup of coffee with latte art in the shape of a heart, steam rising, on a saucer."
JSON = {"Accept": "application/json"}


def take_next(client, offer):
    """What the offer after a give-back's "Take the next task" button asks for."""
    return client.get(offer.wsgi_request.path, {**dict(offer.context["query"]), "take": "1"})


def test_an_in_house_annotator_gives_a_task_back_and_its_slot_is_free_at_once():
    first, second = caption_unit(), caption_unit()
    alice = logged_in("alice")
    page = alice.get(f"/work/{Stage.CAPTION}/")
    held = page.context["assignment"]
    assert b"Give this task back" in page.content
    offer = alice.post("/work/give-back/", {"token": page.context["token"]}, follow=True)
    held.refresh_from_db()
    assert held.status == Assignment.Status.RETURNED
    assert "Task given back" in offer.content.decode()
    # The next task waits for them to ask (issue 38): nothing else is leased meanwhile.
    assert Assignment.objects.count() == 1
    moved_on = take_next(alice, offer)
    assert moved_on.context["assignment"].unit != held.unit
    # Someone else gets the unit that was given back, without waiting for the lease to run out.
    bob = Worker.objects.create(platform=Worker.Platform.LOCAL, external_id="bob")
    assert next_assignment(worker=bob, stage=Stage.CAPTION).unit == held.unit
    assert {first, second} == {held.unit, moved_on.context["assignment"].unit}


def test_a_study_participant_gives_a_task_back_and_stays_in_the_study():
    for _ in range(2):
        verification_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.VERIFICATION)
    browser = Client()
    page = browser.get(prolific_link(Stage.VERIFICATION), follow=True)
    result = browser.post("/work/give-back/", {"token": page.context["token"]}, headers=JSON).json()
    assert result["ok"] and "continue=" in result["next"]
    offer = browser.get(result["next"])
    assert b"Take the next task" in offer.content and Assignment.objects.count() == 1
    following = take_next(browser, offer)
    assert following.context["assignment"].unit != page.context["assignment"].unit
    assert Assignment.objects.get(pk=page.context["assignment"].pk).status == Assignment.Status.RETURNED


def test_an_mturk_worker_who_gives_back_is_told_to_return_the_hit_there():
    unit = caption_unit()
    page = Client().get(unit_url(unit))
    response = Client().post("/work/give-back/", {"token": page.context["token"]})
    assert "press “Return” on MTurk" in response.content.decode()
    assert Assignment.objects.get().status == Assignment.Status.RETURNED


def test_a_forged_give_back_changes_nothing():
    unit = caption_unit()
    Client().get(unit_url(unit))
    assert Client().post("/work/give-back/", {"token": "forged"}, headers=JSON).status_code == 403
    assert Assignment.objects.get().status == Assignment.Status.LEASED


def test_after_a_submit_the_next_page_says_saved():
    caption_unit(), caption_unit()
    ann = logged_in()
    page = ann.get(f"/work/{Stage.CAPTION}/")
    result = ann.post("/work/submit/", {"token": page.context["token"], "caption-0": CAPTION},
                      headers=JSON).json()
    assert "after=saved" in result["next"]
    assert "Saved. Your answer is stored; here is the next task." in ann.get(result["next"]).content.decode()
    without_js = ann.post("/work/submit/", {"token": ann.get(f"/work/{Stage.CAPTION}/").context["token"],
                                            "caption-0": CAPTION}, follow=True)
    # That was the last unit: the page saying nothing is left points to no next task.
    last = without_js.content.decode()
    assert "Nothing waiting" in last and "Saved. Your answer is stored." in last and "next task" not in last


def test_a_task_answered_again_from_its_old_page_keeps_its_first_answer_and_says_so():
    """The Back button shows a submitted task's page again, token and all; a changed answer sent
    from it is not stored over the first, and the page after says the first is kept, not "Saved"."""
    caption_unit(), caption_unit()
    ann = logged_in("ann")
    page = ann.get(f"/work/{Stage.CAPTION}/")
    token, assignment = page.context["token"], page.context["assignment"]
    first = ann.post("/work/submit/", {"token": token, "caption-0": CAPTION}, follow=True)
    assert "Saved. Your answer is stored" in first.content.decode()

    changed = "Another caption entirely: a black espresso in a small glass on a metal counter."
    again = ann.post("/work/submit/", {"token": token, "caption-0": changed}, follow=True)

    shown = again.content.decode()
    assert "You had already submitted that task, so your first answer is kept" in shown and "Saved." not in shown
    assignment.refresh_from_db()
    assert assignment.caption.texts == [CAPTION]
    by_script = ann.post("/work/submit/", {"token": token, "caption-0": changed}, headers=JSON).json()
    assert by_script["ok"] and "after=kept" in by_script["next"]


def test_an_in_house_annotator_logs_out():
    caption_unit()
    ann = logged_in()
    assert b"Log out" in ann.get("/work/").content
    response = ann.post("/work/logout/")
    assert response.status_code == 302 and response["Location"].startswith("/work/login/")
    assert ann.get("/work/").status_code == 302


def test_swagger_ui_is_served_from_our_own_static_files():
    from django.contrib.staticfiles import finders

    staff = get_user_model().objects.create_user("researcher", password="pw", is_staff=True,
                                                 is_superuser=True)
    client = Client()
    client.force_login(staff)
    html = client.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower() and "<script>" not in html.replace(" ", "")
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert client.get("/api/docs/?script=").status_code == 200


def test_a_task_held_is_offered_again_from_the_home_page():
    """A worker who stepped away from a task they still hold finds it from the home page: it is not
    waiting for anybody else, so it was counted nowhere and the stage said "Nothing now"."""
    caption_unit()
    ann = logged_in()
    held = ann.get(f"/work/{Stage.CAPTION}/").context["assignment"]

    home = ann.get("/work/").content.decode()

    assert "data-held" in home and "Continue your task" in home
    assert ann.get(f"/work/{Stage.CAPTION}/").context["assignment"] == held
    assert "Continue your task" not in logged_in("another").get("/work/").content.decode()
