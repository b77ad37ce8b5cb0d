"""Confirmed participants: new ids from one address are throttled, and a sync confirms work the
platform's own record shows and quarantines (rejects, asks again) the rest."""


import pytest
from django.core.cache import cache
from django.test import Client

from annotation.crowdwork import queue
from annotation.models import Assignment, Caption, Stage, WorkState, WorkUnit
from mturk.models import CrowdStudy
from mturk.services import syncing
from tests.factories import WorkerFactory
from tests.frontend_support import PROLIFIC_STUDY_ID, caption_unit, prolific_caption_study, unit_url
from tests.mturk_wire import assignment as mturk_assignment

pytestmark = pytest.mark.django_db
STUDY_ID = PROLIFIC_STUDY_ID
CAPTION = "A white cup of coffee with latte art in the shape of a heart, steam rising, on a saucer."


@pytest.fixture(autouse=True)
def fresh_throttle(settings):
    settings.PUBLIC_BASE_URL = "https://crowdbench.example.org"
    cache.clear()
    yield
    cache.clear()


def link(pid, session):
    return f"/work/caption/?PROLIFIC_PID={pid}&STUDY_ID={STUDY_ID}&SESSION_ID={session}"


def test_made_up_ids_from_one_address_are_throttled_and_a_sync_quarantines_those_prolific_never_saw(
        prolific, settings):
    settings.STUDY_NEW_PARTICIPANTS_RATE = "5/h"
    prolific_caption_study(units=10)
    answered, refused = {}, []
    for n in range(20):
        pid, session = f"60ffe5c8371090c7041d4{n:03d}", f"sess{n:03d}"
        browser = Client()  # a new browser each time, one address (127.0.0.1)
        page = browser.get(link(pid, session), follow=True)
        if page.status_code == 429:
            refused.append(pid)
            assert "Too many new participants" in page.content.decode() and page["Retry-After"] == "3600"
            continue
        assert page.status_code == 200
        saved = browser.post("/work/submit/", {"token": page.context["token"], "caption-0": f"{CAPTION} {n}"})
        assert saved.status_code == 302
        answered[pid] = session
    assert (len(answered), len(refused)) == (5, 15)

    # Prolific knows three of the five: the others were typed into the link.
    known = list(answered)[:3]
    for pid in known:
        session = answered[pid]
        prolific.submissions[session] = {"id": session, "participant_id": pid, "study_id": STUDY_ID,
                                         "status": "AWAITING REVIEW", "completed_at": "2026-11-26T10:04:00Z"}
    study = CrowdStudy.objects.get()
    counts = syncing.sync_study(study=study)
    assert counts["quarantined"] == 2

    stored = Assignment.objects.filter(status=Assignment.Status.SUBMITTED).select_related("worker")
    by_participant = {lease.worker.external_id: lease for lease in stored}
    for pid in known:
        assert by_participant[pid].work_state == WorkState.PROVISIONAL
        assert by_participant[pid].confirmed_at is not None
    quarantined = [by_participant[pid] for pid in answered if pid not in known]
    for lease in quarantined:
        assert lease.work_state == WorkState.REJECTED and lease.confirmed_at is None
        assert lease.review_reason.startswith("Quarantined: Prolific has no record of participant")
        assert WorkUnit.objects.get(pk=lease.unit_id).status == WorkUnit.Status.OPEN
    # Their captions are out of every count, and their tasks go to somebody else.
    assert Caption.objects.filter(assignment__work_state=WorkState.REJECTED).count() == 2
    other = WorkerFactory(platform="prolific", external_id="60ffe5c8371090c7041d4999")
    asked = {queue.next_assignment(worker=other, stage=Stage.CAPTION).unit_id}
    assert asked <= {lease.unit_id for lease in quarantined} | set(
        WorkUnit.objects.filter(status=WorkUnit.Status.OPEN).values_list("pk", flat=True))
    # A second sync finds nothing new.
    assert "quarantined" not in syncing.sync_study(study=study)


def test_a_participant_already_admitted_is_not_throttled_again(settings):
    settings.STUDY_NEW_PARTICIPANTS_RATE = "1/h"
    prolific_caption_study(units=3)
    browser = Client()
    assert browser.get(link("60ffe5c8371090c7041d4001", "s1"), follow=True).status_code == 200
    assert browser.get(link("60ffe5c8371090c7041d4001", "s1")).status_code == 200
    assert Client().get(link("60ffe5c8371090c7041d4002", "s2"), follow=True).status_code == 429


IMPOSTOR, VICTIM = "AIMPOSTOR000001", "AVICTIM0000001"
IMPOSTOR_ASG, VICTIM_ASG = "3IMPOSTORASG000001", "3VICTIMASG00000001"


def test_a_hit_opened_with_another_workers_id_is_quarantined_after_sync_and_the_real_worker_can_do_it(mturk):
    unit = caption_unit()
    # The impostor accepted the HIT (MTurk's assignment is theirs) and opened it with the victim's id.
    page = Client().get(unit_url(unit, assignment_id=IMPOSTOR_ASG, worker_id=VICTIM))
    assert page.status_code == 200
    saved = Client().post("/work/submit/", {"token": page.context["token"], "caption-0": CAPTION},
                          headers={"Accept": "application/json"})
    assert saved.json()["ok"]
    stored = Assignment.objects.get(platform_assignment_id=IMPOSTOR_ASG)
    assert stored.worker.external_id == VICTIM  # the claim, taken on trust at first load

    hit = unit.hits.get()
    mturk.expect("list_assignments_for_hit", {"NumResults": 1, "Assignments": [
        mturk_assignment(assignment_id=IMPOSTOR_ASG, worker_id=IMPOSTOR, hit_id=hit.hit_id)]})
    counts = syncing.sync_study(study=hit.study)
    mturk.done()
    assert counts["quarantined"] == 1
    stored.refresh_from_db()
    assert (stored.work_state, stored.worker.external_id, stored.platform_assignment_id) == (
        WorkState.REJECTED, IMPOSTOR, "")
    assert stored.review_reason.startswith("Quarantined: MTurk's record")
    assert Caption.objects.get(assignment=stored).author.external_id == IMPOSTOR
    assert WorkUnit.objects.get(pk=unit.pk).status == WorkUnit.Status.OPEN

    # The victim accepts the HIT themselves and does it.
    own = Client().get(unit_url(unit, assignment_id=VICTIM_ASG, worker_id=VICTIM))
    assert own.status_code == 200 and 'name="token"' in own.content.decode()
    done = Client().post("/work/submit/", {"token": own.context["token"], "caption-0": CAPTION + " Mine."},
                         headers={"Accept": "application/json"})
    assert done.json()["ok"]
    assert Caption.objects.filter(author__external_id=VICTIM, assignment__work_state=WorkState.PROVISIONAL).count() == 1
