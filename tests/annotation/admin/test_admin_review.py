"""A reviewer rejects a worker's verifications in bulk from *Answers to review*: the answers leave
Table 2, their references are decided again by other workers, and MTurk rejects the assignments
(botocore's Stubber at the wire), each call in the audit log."""

import pytest
from django.contrib.messages import get_messages

from annotation.collection import progress
from annotation.crowdwork import queue
from annotation.crowdwork.next_step import Step, next_step
from annotation.models import Assignment, Reference, Stage, WorkerBlock, WorkState
from mturk.models import AuditLog, Submission
from tests.factories import WorkerFactory
from tests.mturk_wire import assignment
from tests.review_support import make_reviewer
from tests.review_support import verified_on_mturk as _verified_on_mturk

pytestmark = pytest.mark.django_db
REASON = "These verifications were submitted in under three seconds each, without opening the images."


def test_rejecting_answers_in_bulk_reopens_their_decisions_and_rejects_them_on_mturk(client, mturk):
    spammer = WorkerFactory(external_id="A1SPAMMER00000001")
    study, leases = _verified_on_mturk(mturk, spammer)
    assert Submission.objects.filter(review=Submission.Review.READY).count() == 2
    assert progress.table2().overall.references == 2
    client.force_login(make_reviewer())
    for lease in leases:
        record = assignment(assignment_id=lease.platform_assignment_id, worker_id=spammer.external_id,
                            hit_id=lease.platform_listing_id)
        mturk.expect("get_assignment", {"Assignment": record}, {"AssignmentId": lease.platform_assignment_id})
        mturk.expect("reject_assignment", {}, {"AssignmentId": lease.platform_assignment_id,
                                               "RequesterFeedback": REASON})
    url = "/admin/annotation/answer/"
    ids = [lease.pk for lease in leases]
    form = client.post(url, {"action": "reject", "_selected_action": ids, "index": "0"})
    assert form.status_code == 200 and b"Reject answers" in form.content
    done = client.post(url, {"action": "reject", "_selected_action": ids, "apply": "1", "reason": REASON},
                       follow=True)
    messages = [str(message) for message in get_messages(done.wsgi_request)]
    mturk.done()
    assert any("2 answer(s) rejected" in message and "2 decision(s) reopened" in message for message in messages)
    assert sum(message.startswith("MTurk: ") and "rejected there" in message for message in messages) == 2
    assert set(Assignment.objects.filter(pk__in=ids).values_list("work_state", flat=True)) == {WorkState.REJECTED}
    assert set(Submission.objects.values_list("review", flat=True)) == {Submission.Review.REJECTED}
    assert AuditLog.objects.filter(action=AuditLog.Action.REJECT, ok=True).count() == 2
    assert progress.table2().overall.references == 0
    assert set(Reference.objects.values_list("verdict", flat=True)) == {Reference.Verdict.PENDING}
    # Another worker is asked; the spammer is not.
    assert queue.next_assignment(worker=spammer, stage=Stage.VERIFICATION) is None
    other = WorkerFactory()
    assert queue.next_assignment(worker=other, stage=Stage.VERIFICATION).unit_id in {lease.unit_id for lease in leases}


def test_the_answers_page_lists_each_answer_with_its_worker_s_time_and_filters_by_worker(client, mturk):
    spammer = WorkerFactory(external_id="A1SPAMMER00000002")
    _verified_on_mturk(mturk, spammer, count=1)
    client.force_login(make_reviewer())
    admin = client.get("/admin/")
    assert b"Answers to review" in admin.content
    page = client.get(f"/admin/annotation/answer/?worker__id__exact={spammer.pk}&unit__stage__exact=verification")
    text = page.content.decode()
    assert page.status_code == 200
    assert "correct" in text and "Provisional" in text and spammer.pseudonym in text


def test_rejecting_with_stop_this_worker_blocks_them_here_and_on_mturk(client, mturk):
    spammer = WorkerFactory(external_id="A1SPAMMER00000003")
    _, leases = _verified_on_mturk(mturk, spammer, count=2)
    reviewer = make_reviewer()
    client.force_login(reviewer)
    for lease in leases:
        record = assignment(assignment_id=lease.platform_assignment_id, worker_id=spammer.external_id,
                            hit_id=lease.platform_listing_id)
        mturk.expect("get_assignment", {"Assignment": record}, {"AssignmentId": lease.platform_assignment_id})
        mturk.expect("reject_assignment", {}, {"AssignmentId": lease.platform_assignment_id,
                                               "RequesterFeedback": REASON})
    # One block for the worker of both answers, after their rejection.
    mturk.expect("create_worker_block", {}, {"WorkerId": spammer.external_id, "Reason": REASON})
    url = "/admin/annotation/answer/"
    ids = [lease.pk for lease in leases]
    form = client.post(url, {"action": "reject", "_selected_action": ids, "index": "0"})
    assert "Also stop this worker getting more tasks" in form.content.decode()

    done = client.post(url, {"action": "reject", "_selected_action": ids, "apply": "1", "reason": REASON,
                             "stop_workers": "on"}, follow=True)

    mturk.done()
    messages = [str(message) for message in get_messages(done.wsgi_request)]
    assert any("2 answer(s) rejected" in message for message in messages)
    assert f"1 worker(s) will get no more tasks (blocked): {spammer.pseudonym}." in messages
    block = WorkerBlock.objects.get(worker=spammer)
    assert (block.active, block.reason, block.created_by) == (True, REASON, reviewer)
    assert AuditLog.objects.filter(action=AuditLog.Action.BLOCK, worker=spammer, ok=True).count() == 1
    assert next_step(worker=spammer, stage=Stage.VERIFICATION).kind == Step.BLOCKED
    assert next_step(worker=spammer, stage=Stage.CAPTION).kind == Step.BLOCKED


def test_rejecting_without_stop_this_worker_leaves_them_free_to_work(client, mturk):
    careless = WorkerFactory(external_id="A1CARELESS0000001")
    _, (lease,) = _verified_on_mturk(mturk, careless, count=1)
    client.force_login(make_reviewer())
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id=lease.platform_assignment_id, worker_id=careless.external_id,
        hit_id=lease.platform_listing_id)}, {"AssignmentId": lease.platform_assignment_id})
    mturk.expect("reject_assignment", {}, {"AssignmentId": lease.platform_assignment_id,
                                           "RequesterFeedback": REASON})
    client.post("/admin/annotation/answer/", {"action": "reject", "_selected_action": [lease.pk], "apply": "1",
                                              "reason": REASON})
    mturk.done()
    assert not WorkerBlock.objects.exists()
    assert next_step(worker=careless, stage=Stage.VERIFICATION).kind != Step.BLOCKED


def test_a_reviewer_who_may_not_block_workers_is_not_offered_to_stop_one(client, mturk):
    spammer = WorkerFactory(external_id="A1SPAMMER00000004")
    _, (lease,) = _verified_on_mturk(mturk, spammer, count=1)
    client.force_login(make_reviewer(can_block=False))
    form = client.post("/admin/annotation/answer/", {"action": "reject", "_selected_action": [lease.pk],
                                                     "index": "0"})
    assert b"Reject answers" in form.content
    assert "stop_workers" not in form.content.decode()


def test_rejecting_platform_submissions_with_stop_this_worker_blocks_their_worker(client, mturk):
    spammer = WorkerFactory(external_id="A1SPAMMER00000005")
    _, (lease,) = _verified_on_mturk(mturk, spammer, count=1)
    submission = Submission.objects.get()
    client.force_login(make_reviewer())
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id=lease.platform_assignment_id, worker_id=spammer.external_id,
        hit_id=lease.platform_listing_id)}, {"AssignmentId": lease.platform_assignment_id})
    mturk.expect("reject_assignment", {}, {"AssignmentId": lease.platform_assignment_id,
                                           "RequesterFeedback": REASON})
    mturk.expect("create_worker_block", {}, {"WorkerId": spammer.external_id, "Reason": REASON})

    client.post("/admin/mturk/submission/", {"action": "reject", "_selected_action": [submission.pk], "apply": "1",
                                             "message": REASON, "stop_workers": "on"})

    mturk.done()
    assert Assignment.objects.get(pk=lease.pk).work_state == WorkState.REJECTED
    assert WorkerBlock.objects.get(worker=spammer).reason == REASON
    assert next_step(worker=spammer, stage=Stage.VERIFICATION).kind == Step.BLOCKED
