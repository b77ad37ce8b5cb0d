"""Issue 10.1: a worker id in an MTurk link is a claim, never enough to act as that worker.

The (assignmentId, workerId) pair is fixed when a HIT's page first loads; any claim that disagrees
with it is checked with MTurk's GetAssignment (botocore's Stubber on the real client) before it
gets a token, a lease or a look at anybody's work, and a refused claim changes nothing.
"""

import pytest
from django.test import Client

from annotation.collection.captions import submit_caption
from annotation.exceptions import AnnotationError
from annotation.models import Assignment, Caption, Worker
from tests.frontend_support import caption_unit, preview_url, published_hit, unit_url
from tests.mturk_wire import assignment as mturk_assignment

pytestmark = pytest.mark.django_db

VICTIM, ATTACKER = "AVICTIM0000001", "AATTACKER00001"
VICTIM_ASG, ATTACKER_ASG = "3VICTIMASG000000001", "3ATTACKERASG0000001"
CAPTION = "A white cup of coffee with latte art in the shape of a heart, steam rising, on a saucer."


def submit(token, text):
    return Client().post("/work/submit/", {"token": token, "caption-0": text},
                         headers={"Accept": "application/json"})


def victim_at_work(unit):
    page = Client().get(unit_url(unit, assignment_id=VICTIM_ASG, worker_id=VICTIM))
    assert page.status_code == 200
    return page.context["token"]


def stored_state():
    return sorted(Assignment.objects.values_list(
        "pk", "worker__external_id", "status", "platform_assignment_id", "platform_listing_id"))


def assert_got_nothing(response):
    assert response.status_code == 403
    html = response.content.decode()
    assert 'name="token"' not in html
    assert "/work/me/" not in html
    assert CAPTION not in html


def test_the_attackers_own_assignment_with_the_victims_worker_id_gets_nothing(mturk):
    unit = caption_unit()
    hit = published_hit(unit)
    victim_at_work(unit)
    before = stored_state()
    mturk.expect("get_assignment", {"Assignment": mturk_assignment(
        assignment_id=ATTACKER_ASG, worker_id=ATTACKER, hit_id=hit.hit_id)},
        {"AssignmentId": ATTACKER_ASG})
    attack = Client().get(unit_url(unit, assignment_id=ATTACKER_ASG, worker_id=VICTIM,
                                   hit_id=hit.hit_id))
    mturk.done()
    assert_got_nothing(attack)
    assert "MTurk does not confirm" in attack.content.decode()
    assert stored_state() == before


def test_a_claim_mturk_cannot_confirm_is_refused(mturk):
    # GetAssignment knows only submitted, approved and rejected assignments: an accepted one that
    # is still being worked on cannot be confirmed, so the conflicting claim is refused.
    unit = caption_unit()
    victim_at_work(unit)
    before = stored_state()
    mturk.fail("get_assignment", "RequestError", "Assignment does not exist.")
    attack = Client().get(unit_url(unit, assignment_id=ATTACKER_ASG, worker_id=VICTIM))
    mturk.done()
    assert_got_nothing(attack)
    assert stored_state() == before


def test_an_assignment_id_bound_to_another_worker_is_not_handed_over(mturk):
    unit = caption_unit()
    hit = published_hit(unit)
    victim_at_work(unit)
    before = stored_state()
    mturk.expect("get_assignment", {"Assignment": mturk_assignment(
        assignment_id=VICTIM_ASG, worker_id=VICTIM, hit_id=hit.hit_id)})
    attack = Client().get(unit_url(unit, assignment_id=VICTIM_ASG, worker_id=ATTACKER))
    mturk.done()
    assert_got_nothing(attack)
    assert stored_state() == before
    assert not Worker.objects.filter(external_id=ATTACKER).exists()


def test_a_hit_id_that_is_not_this_units_hit_opens_nothing(mturk):
    unit, other = caption_unit(), caption_unit()
    victim_at_work(unit)
    before = stored_state()
    for hit_id in (published_hit(other).hit_id, "3MADEUPHIT000000000"):
        attack = Client().get(unit_url(unit, assignment_id=ATTACKER_ASG, worker_id=VICTIM,
                                       hit_id=hit_id))
        assert attack.status_code == 404
        assert 'name="token"' not in attack.content.decode()
    assert mturk.operations() == []
    assert stored_state() == before


def test_the_victims_own_submit_after_a_refused_attack_stores_the_victims_text(mturk):
    unit = caption_unit()
    token = victim_at_work(unit)
    mturk.fail("get_assignment", "RequestError", "Assignment does not exist.")
    Client().get(unit_url(unit, assignment_id=ATTACKER_ASG, worker_id=VICTIM))
    first = submit(token, CAPTION).json()
    again = submit(token, CAPTION + " Sent twice.").json()
    assert first["ok"] and again["ok"]
    assert first["mturk"]["fields"]["assignmentId"] == VICTIM_ASG
    assert first["submission"] == again["submission"]
    assert list(Caption.objects.values_list("texts", flat=True)) == [[CAPTION]]


def test_a_worker_who_accepted_again_is_confirmed_by_mturk_and_the_old_page_is_retired(mturk):
    # The victim returned the HIT on MTurk and accepted it again: a new assignment id, which MTurk
    # confirms is theirs once it is submitted there.
    unit = caption_unit()
    hit = published_hit(unit)
    old_token = victim_at_work(unit)
    new_asg = "3VICTIMASG000000002"
    mturk.expect("get_assignment", {"Assignment": mturk_assignment(
        assignment_id=new_asg, worker_id=VICTIM, hit_id=hit.hit_id)})
    page = Client().get(unit_url(unit, assignment_id=new_asg, worker_id=VICTIM))
    mturk.done()
    assert page.status_code == 200
    assert Assignment.objects.get().platform_assignment_id == new_asg
    assert submit(old_token, CAPTION).status_code == 403
    assert submit(page.context["token"], CAPTION).json()["mturk"]["fields"]["assignmentId"] == new_asg


def test_a_returned_assignment_id_confirmed_for_a_new_worker_frees_the_old_lease(mturk):
    unit = caption_unit()
    hit = published_hit(unit)
    victim_at_work(unit)
    mturk.expect("get_assignment", {"Assignment": mturk_assignment(
        assignment_id=VICTIM_ASG, worker_id="ANEWWORKER0001", hit_id=hit.hit_id)})
    page = Client().get(unit_url(unit, assignment_id=VICTIM_ASG, worker_id="ANEWWORKER0001"))
    assert page.status_code == 200
    statuses = dict(Assignment.objects.values_list("worker__external_id", "status"))
    assert statuses == {VICTIM: Assignment.Status.RETURNED, "ANEWWORKER0001": Assignment.Status.LEASED}


def test_a_stored_answer_is_returned_to_its_author_only():
    unit = caption_unit()
    token = victim_at_work(unit)
    submit(token, CAPTION)
    mine = Assignment.objects.get()
    stranger = Worker.objects.create(platform=Worker.Platform.MTURK, external_id=ATTACKER)
    with pytest.raises(AnnotationError, match="given to someone else"):
        submit_caption(assignment_id=mine.pk, worker=stranger, texts=["anything at all, long enough"])
    again = submit_caption(assignment_id=mine.pk, worker=mine.worker, texts=[CAPTION + " again"])
    assert again.texts == [CAPTION]
    assert Caption.objects.count() == 1


def test_a_bare_worker_id_does_not_open_that_workers_qualification_test():
    from tests.frontend_support import qualification_test

    qualification_test()
    response = Client().get(f"/work/qualify/verification/?workerId={VICTIM}")
    assert response.status_code == 403
    assert not Worker.objects.exists()


# --- anonymous preview (issue 10.7) ------------------------------------------------------------


def test_preview_opens_only_units_published_as_mturk_hits():
    from urllib.parse import urlencode

    unit = caption_unit()
    made_up = urlencode({"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "3MADEUPHIT0000"})
    for query in (made_up, "assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE", "hitId=x"):
        response = Client().get(f"/work/unit/{unit.pk}/?{query}")
        assert response.status_code == 404
        assert unit.instance.instruction not in response.content.decode()
    assert Client().get(preview_url(unit)).status_code == 200


def test_preview_of_a_prolific_only_unit_shows_nothing():
    from tests.frontend_support import study

    unit = caption_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=unit.stage, family=unit.family)
    response = Client().get(f"/work/unit/{unit.pk}/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE")
    assert response.status_code == 404
    assert unit.instance.instruction not in response.content.decode()


def test_preview_carries_no_token_no_worker_link_and_no_other_workers_text():
    unit = caption_unit()
    victim_at_work(unit)
    response = Client().get(preview_url(unit))
    html = response.content.decode()
    assert response.context["token"] == ""
    assert 'name="token" value=""' in html
    assert "/work/me/" not in html and "Finish and get my code" not in html
    assert not Assignment.objects.exclude(worker__external_id=VICTIM).exists()


def test_a_first_claim_of_a_worker_id_on_another_hit_shows_none_of_that_workers_record(mturk):
    # The victim did one unit; the attacker opens a fresh HIT with their own assignment and the
    # victim's id. MTurk cannot confirm a claim in progress, so "Your work" shows that task only.
    done, fresh = caption_unit(), caption_unit()
    assert submit(victim_at_work(done), CAPTION).json()["ok"]
    page = Client().get(unit_url(fresh, assignment_id=ATTACKER_ASG, worker_id=VICTIM))
    mturk.fail("get_assignment", "RequestError", "Assignment does not exist.")
    record = Client().get(f"/work/me/?w={page.context['worker_token']}")
    mturk.done()
    html = record.content.decode()
    assert "data-partial-record" in html
    assert CAPTION not in html
    assert [row.stage for row in record.context["tallies"]] == ["caption"]
    assert record.context["tallies"][0].submitted == 0
