"""Annotator pages through Django's test client: tokens, headers, preview, no-JS fallbacks."""

import pytest
from django.contrib.auth import get_user_model
from django.core import signing
from django.http import HttpRequest
from django.test import Client

from annotation.crowdwork.standing import local_worker
from annotation.models import Assignment, Caption, Stage, Verification, Worker, WorkerBlock
from frontend import tokens
from tests.factories import ImageAssetFactory
from tests.frontend_support import (
    XSS_INSTRUCTION,
    accept,
    caption_unit,
    preview_url,
    published_hit,
    unit_url,
    verification_unit,
)
from tests.mturk_wire import assignment as mturk_assignment

pytestmark = pytest.mark.django_db

CAPTION = "A white cup of coffee with latte art in the shape of a heart, steam rising, on a saucer."


def submit(client, token, *, accept_json=True, **fields):
    headers = {"Accept": "application/json"} if accept_json else {}
    return client.post("/work/submit/", {"token": token, **fields}, headers=headers)


def test_mturk_preview_shows_the_task_read_only_and_leases_nothing():
    unit = caption_unit()
    response = Client().get(preview_url(unit))
    assert response.status_code == 200
    assert response.context["preview"] is True
    assert response.context["token"] == ""
    assert b'<fieldset class="plain" disabled>' in response.content
    assert b"Accept the HIT to start" in response.content
    assert not Assignment.objects.exists()
    assert not Worker.objects.exists()


def test_mturk_accept_leases_the_unit_and_records_assignment_and_hit_ids():
    unit = caption_unit()
    hit = published_hit(unit)
    accept(Client(), unit, assignment_id="3ASG", worker_id="AW1", hit_id=hit.hit_id)
    assignment = Assignment.objects.get()
    assert (assignment.unit, assignment.worker.platform, assignment.worker.external_id) == (
        unit, Worker.Platform.MTURK, "AW1")
    assert (assignment.platform_assignment_id, assignment.platform_listing_id) == ("3ASG", hit.hit_id)


def test_reloading_an_accepted_hit_resumes_the_same_assignment():
    unit = caption_unit()
    accept(Client(), unit)
    accept(Client(), unit)
    assert Assignment.objects.count() == 1


def test_submit_stores_the_answer_for_the_tokens_worker_whatever_the_url_claims():
    unit = caption_unit()
    token = accept(Client(), unit, worker_id="AHONEST").context["token"]
    response = Client().post("/work/submit/?workerId=AMALLORY&assignmentId=X",
                             {"token": token, "caption-0": CAPTION, "workerId": "AMALLORY"},
                             headers={"Accept": "application/json"})
    assert response.status_code == 200, response.content
    caption = Caption.objects.get()
    assert caption.author.external_id == "AHONEST"
    assert not Worker.objects.filter(external_id="AMALLORY").exists()


def test_altered_token_is_refused_and_nothing_is_stored():
    unit = caption_unit()
    token = accept(Client(), unit).context["token"]
    value, stamp, signature = token.rsplit(":", 2)
    forged = f"{value}:{stamp}:{signature[:-2]}{'AA' if signature[-2:] != 'AA' else 'BB'}"
    response = submit(Client(), forged, **{"caption-0": CAPTION})
    assert response.status_code == 403
    assert response.json()["ok"] is False
    assert not Caption.objects.exists()


def test_token_for_another_workers_assignment_cannot_be_made_without_the_salt():
    unit = caption_unit()
    accept(Client(), unit, worker_id="AVICTIM")
    victim_assignment = Assignment.objects.get()
    attacker = Worker.objects.create(platform=Worker.Platform.MTURK, external_id="AATTACKER")
    # Signed with our key but not for this purpose (another salt, e.g. a study-session token).
    forged = signing.dumps({"a": victim_assignment.pk, "w": attacker.pk})
    assert submit(Client(), forged, **{"caption-0": CAPTION}).status_code == 403
    session_token = tokens.sign_session(tokens.StudySession(worker_id=attacker.pk, study_id=1))
    assert submit(Client(), session_token, **{"caption-0": CAPTION}).status_code == 403
    assert not Caption.objects.exists()


def test_expired_token_is_refused_with_a_message_to_reload(settings):
    unit = caption_unit()
    token = accept(Client(), unit).context["token"]
    settings.ANNOTATOR_TOKEN_MAX_AGE_SECONDS = -1
    response = submit(Client(), token, **{"caption-0": CAPTION})
    assert response.status_code == 403
    assert "Reload it" in response.json()["error"]


def test_submit_needs_no_csrf_cookie_because_the_token_is_the_defence():
    unit = caption_unit()
    token = accept(Client(), unit).context["token"]
    strict = Client(enforce_csrf_checks=True)
    assert submit(strict, token, **{"caption-0": CAPTION}).status_code == 200
    assert Caption.objects.count() == 1


def test_submitting_twice_stores_one_answer():
    unit = caption_unit()
    token = accept(Client(), unit).context["token"]
    first = submit(Client(), token, **{"caption-0": CAPTION}).json()
    second = submit(Client(), token, **{"caption-0": CAPTION + " Again."}).json()
    assert first["submission"] == second["submission"]
    assert Caption.objects.count() == 1


def test_mturk_submit_hands_back_to_external_submit_with_the_assignment_id():
    unit = caption_unit()
    token = accept(Client(), unit, assignment_id="3ASGX").context["token"]
    result = submit(Client(), token, **{"caption-0": CAPTION, "active_seconds": "42.5"}).json()
    caption = Caption.objects.get()
    assert result["mturk"] == {
        "action": "https://workersandbox.mturk.com/mturk/externalSubmit",
        "fields": {"assignmentId": "3ASGX", "submission": f"caption-{caption.pk}"},
    }
    assert caption.assignment.active_seconds == 42.5


def test_without_javascript_the_handback_is_a_form_to_mturk():
    unit = caption_unit()
    token = accept(Client(), unit, assignment_id="3ASGY").context["token"]
    response = submit(Client(), token, accept_json=False, **{"caption-0": CAPTION})
    assert response.status_code == 200
    assert b'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in response.content
    assert b'name="assignmentId" value="3ASGY"' in response.content


def test_refused_answer_without_javascript_shows_why_and_keeps_the_text():
    unit = caption_unit()
    token = accept(Client(), unit).context["token"]
    response = submit(Client(), token, accept_json=False, **{"caption-0": "Too short <b>x</b>"})
    assert response.status_code == 400
    assert b"too short" in response.content
    assert b"Too short &lt;b&gt;x&lt;/b&gt;</textarea>" in response.content


def test_turk_submit_to_outside_mturk_is_refused():
    unit = caption_unit()
    response = Client().get(unit_url(unit, turk_submit_to="https://evil.example"))
    assert response.status_code == 400
    assert not Assignment.objects.exists()


def test_stage_pages_may_be_framed_by_mturk_only():
    unit = caption_unit()
    response = Client().get(preview_url(unit))
    policy = response["Content-Security-Policy"]
    assert "frame-ancestors 'self' https://worker.mturk.com https://workersandbox.mturk.com" in policy
    assert "X-Frame-Options" not in response
    assert "script-src 'self'" in policy


def test_images_load_only_from_this_site_and_the_allow_list(settings):
    settings.IMAGE_URL_ALLOWED_HOSTS = ["upload.wikimedia.org"]
    unit = caption_unit()
    response = Client().get(preview_url(unit))
    img_src = next(part for part in response["Content-Security-Policy"].split("; ")
                   if part.startswith("img-src"))
    assert img_src == "img-src 'self' blob: https://upload.wikimedia.org"


def test_image_url_outside_the_allow_list_is_shown_as_text_not_loaded(settings):
    settings.IMAGE_URL_ALLOWED_HOSTS = ["upload.wikimedia.org"]
    unit = caption_unit()
    link = unit.instance.instanceimage_set.get()
    link.image = ImageAssetFactory(url="https://tracker.example.net/pixel.jpg?who=you")
    link.save()
    allowed = ImageAssetFactory(url="https://upload.wikimedia.org/a/b/Cat.jpg")
    unit.instance.instanceimage_set.create(image=allowed, position=1)
    html = Client().get(preview_url(unit)).content.decode()
    assert 'src="https://tracker.example.net' not in html
    assert "https://tracker.example.net/pixel.jpg?who=you" in html
    assert 'src="https://upload.wikimedia.org/a/b/Cat.jpg"' in html


def test_login_page_is_not_frameable():
    response = Client().get("/work/login/")
    assert response["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]


def test_worker_text_is_escaped_on_the_next_workers_page():
    unit = caption_unit(instruction=XSS_INSTRUCTION)
    html = Client().get(preview_url(unit)).content.decode()
    assert "<script>window.__xss" not in html
    assert "&lt;script&gt;window.__xss=2&lt;/script&gt;" in html
    assert '<img src=x onerror' not in html


def test_in_house_token_is_good_only_in_its_own_session():
    unit = caption_unit()
    users = get_user_model()
    alice = users.objects.create_user("alice", password="pw-alice-123")
    users.objects.create_user("bob", password="pw-bob-123")
    as_alice = Client()
    as_alice.force_login(alice)
    token = as_alice.get(f"/work/unit/{unit.pk}/").context["token"]
    as_bob = Client()
    as_bob.login(request=HttpRequest(), username="bob", password="pw-bob-123")
    assert submit(as_bob, token, **{"caption-0": CAPTION}).status_code == 403
    assert submit(Client(), token, **{"caption-0": CAPTION}).status_code == 403
    assert submit(as_alice, token, **{"caption-0": CAPTION}).status_code == 200


def test_a_units_own_link_asks_next_step_so_a_blocked_in_house_annotator_is_refused_there_too():
    unit = caption_unit()
    annotator = get_user_model().objects.create_user("carol", password="pw-carol-123")
    browser = Client()
    browser.force_login(annotator)
    WorkerBlock.objects.create(worker=local_worker(annotator), reason="Copied answers between tasks.")
    response = browser.get(f"/work/unit/{unit.pk}/")
    assert b"cannot take these tasks" in response.content
    assert not Assignment.objects.filter(unit=unit).exists()


def test_stage_page_sends_an_anonymous_visitor_to_log_in():
    response = Client().get(f"/work/{Stage.CAPTION}/")
    assert response.status_code == 302
    assert response["Location"].startswith("/work/login/")


def test_unknown_study_is_refused():
    response = Client().get(f"/work/{Stage.CAPTION}/?PROLIFIC_PID=P1&STUDY_ID=NOPE&SESSION_ID=S")
    assert response.status_code == 404
    assert not Assignment.objects.exists()


def test_verification_answer_is_read_from_the_form():
    unit = verification_unit()
    token = accept(Client(), unit).context["token"]
    response = submit(Client(), token, verdict="incorrect", problem="both", harmful="yes")
    assert response.status_code == 200, response.content
    verification = Verification.objects.get()
    assert (verification.is_correct, verification.problem_in_caption,
            verification.problem_in_response, verification.is_harmful) == (False, True, True, True)


def test_worker_page_shows_their_own_work_escaped(mturk):
    unit = caption_unit()
    page = accept(Client(), unit, assignment_id="3ASGMINE", worker_id="AMINE")
    token = page.context["token"]
    submit(Client(), token, **{"caption-0": CAPTION + " <script>x()</script>"})
    # Submitted on MTurk by the hand-back, the assignment is one MTurk now confirms.
    mturk.expect("get_assignment", {"Assignment": mturk_assignment(
        assignment_id="3ASGMINE", worker_id="AMINE", hit_id=published_hit(unit).hit_id)})
    html = Client().get(f"/work/me/?w={page.context['worker_token']}").content.decode()
    mturk.done()
    assert "data-partial-record" not in html
    assert "Instruction-conditioned caption" in html
    assert "&lt;script&gt;x()&lt;/script&gt;" in html
    assert "No qualification test is recorded" in html


def test_an_in_house_annotator_sees_the_work_waiting_per_family_and_may_choose_one(client, django_user_model):
    from annotation.crowdwork import stages as stage_units
    from tests.factories import FamilyFactory, InstanceFactory, launch

    families = [FamilyFactory(name="Animals"), FamilyFactory(name="Drinks")]
    for family, count in zip(families, (1, 2), strict=True):
        for _ in range(count):
            InstanceFactory(family=family)
        launch(family, Stage.CAPTION)
        stage_units.create_work_units(family=family, stage=Stage.CAPTION)
    client.force_login(django_user_model.objects.create_user("ann", password="pw"))
    home = client.get("/work/").content.decode()
    assert 'Drinks</a> <span class="muted">2 waiting' in home
    assert 'Animals</a> <span class="muted">1 waiting' in home
    chosen = client.get(f"/work/caption/?family={families[1].pk}")
    assert chosen.context["assignment"].unit.family == families[1]
    # The choice holds for the tasks that follow, until "any".
    client.post("/work/submit/", {"token": chosen.context["token"],
                                  "caption-0": "A white cup of coffee with a heart drawn in the foam, on a saucer."})
    following = client.get("/work/caption/")
    assert following.context["assignment"].unit.family == families[1]
