"""MTurk through the platform services, every call through botocore's Stubber."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from botocore.stub import ANY
from django.utils import timezone

from annotation.crowdwork import queue
from annotation.models import Assignment, Stage, StageQualification, WorkUnit
from mturk.exceptions import PlatformError
from mturk.models import AuditLog, Bonus, CrowdStudy, Hit, Submission
from mturk.platforms.mturk import external_question
from mturk.services import publishing, reviewing, syncing
from tests.factories import FamilyFactory, WorkerFactory, launch
from tests.mturk_wire import assignment, make_researcher

pytestmark = pytest.mark.django_db

HIT_TYPE = "3HITTYPE000000000000000000000"


def make_study(*, units=2, overlap=1, budget=None, qualified=False):
    family = FamilyFactory()
    launch(family, Stage.CAPTION, overlap=overlap)
    for n in range(units):
        WorkUnit.objects.create(stage=Stage.CAPTION, key=f"u{n}", family=family, overlap=overlap)
    if qualified:
        StageQualification.objects.create(stage=Stage.CAPTION, name="Caption qualification",
                                          description="Five captions to check.")
    return CrowdStudy.objects.create(
        platform="mturk", stage=Stage.CAPTION, family=family, name="Captions",
        title="Describe an image for an instruction", description="Write a caption.",
        keywords="image, caption", reward_usd=Decimal("0.75"), budget_usd=budget,
        requires_stage_qualification=qualified,
    )


def expect_publish(mturk, study, hit_ids, *, max_assignments=1):
    mturk.expect("create_hit_type", {"HITTypeId": HIT_TYPE})
    units = list(publishing.units_to_publish(study)[: len(hit_ids)])
    for unit, hit_id in zip(units, hit_ids, strict=True):
        mturk.expect("create_hit_with_hit_type",
                     {"HIT": {"HITId": hit_id, "HITTypeId": HIT_TYPE,
                              "Expiration": datetime.now(UTC) + timedelta(days=3)}},
                     {"HITTypeId": HIT_TYPE, "MaxAssignments": max_assignments,
                      "LifetimeInSeconds": 72 * 3600, "Question": ANY,
                      "RequesterAnnotation": f"crowdbench unit {unit.pk}",
                      "UniqueRequestToken": f"crowdbench-hit-{study.pk}-{unit.pk}"})
    return units


def test_publish_makes_a_hit_type_with_requirements_and_one_external_question_hit_per_unit(mturk):
    study, researcher = make_study(qualified=True), make_researcher()
    mturk.expect("create_qualification_type",
                 {"QualificationType": {"QualificationTypeId": "3QUALTYPE0000000000000000"}})
    units = expect_publish(mturk, study, ["3HITA000000000000000", "3HITB000000000000000"])
    hits = publishing.publish_batch(study=study, tasks=2, actor=researcher).hits
    mturk.done()
    assert [h.hit_id for h in hits] == ["3HITA000000000000000", "3HITB000000000000000"]
    hit_type = dict(mturk.calls)["CreateHITType"]
    assert hit_type["Reward"] == "0.75"
    assert hit_type["AutoApprovalDelayInSeconds"] == 3 * 24 * 3600
    ids = [(r["QualificationTypeId"], r["Comparator"]) for r in hit_type["QualificationRequirements"]]
    assert ids == [("00000000000000000071", "In"), ("000000000000000000L0", "GreaterThanOrEqualTo"),
                   ("00000000000000000040", "GreaterThanOrEqualTo"), ("3QUALTYPE0000000000000000", "Exists")]
    question = [p for name, p in mturk.calls if name == "CreateHITWithHITType"][0]["Question"]
    assert "ExternalQuestion.xsd" in question
    assert f"<ExternalURL>https://crowdbench.example.org/work/unit/{units[0].pk}/?study={study.pk}" in question
    rows = AuditLog.objects.filter(action="publish", ok=True).order_by("id")
    assert [row.request["step"] for row in rows] == ["HIT type", "HIT", "HIT"]


def test_external_question_escapes_ampersands_and_insists_on_https():
    xml = external_question("https://x.org/work/unit/1/?a=1&b=2", 600)
    assert "<ExternalURL>https://x.org/work/unit/1/?a=1&amp;b=2</ExternalURL>" in xml
    assert "<FrameHeight>600</FrameHeight>" in xml
    with pytest.raises(PlatformError, match="HTTPS"):
        external_question("http://x.org/", 0)


def test_a_retried_create_hit_finds_the_hit_its_lost_answer_made(mturk):
    study = make_study(units=1)
    mturk.expect("create_hit_type", {"HITTypeId": HIT_TYPE})
    mturk.fail("create_hit_with_hit_type", "RequestError",
               "The HIT with ID 3HITLOST00000000000000 already exists.")
    hits = publishing.publish_batch(study=study, tasks=1, actor=make_researcher()).hits
    assert hits[0].hit_id == "3HITLOST00000000000000"
    mturk.done()


def test_publishing_stops_at_the_budget(mturk):
    # Two HITs at $0.75 + $0.15 fee = $1.80; the budget is $1.00.
    study = make_study(units=2, budget=Decimal("1.00"))
    with pytest.raises(PlatformError, match="over its \\$1.00 budget.*at most 1 more"):
        publishing.publish_batch(study=study, tasks=2, actor=make_researcher())
    assert not Hit.objects.exists()
    mturk.done()


def test_only_researchers_with_the_pay_permission_publish(mturk):
    study = make_study()
    with pytest.raises(PlatformError, match="Only researchers"):
        publishing.publish_batch(study=study, tasks=1, actor=make_researcher(can_pay=False))


def _published(mturk, study, hit_ids, **kwargs):
    expect_publish(mturk, study, hit_ids, **kwargs)
    return publishing.publish_batch(study=study, tasks=len(hit_ids), actor=make_researcher("publisher")).hits


def _stored(hit, worker, assignment_id, *, submitted=True):
    now = timezone.now()
    return Assignment.objects.create(
        unit=hit.unit, worker=worker, lease_expires_at=now + timedelta(minutes=30),
        status=Assignment.Status.SUBMITTED if submitted else Assignment.Status.LEASED,
        submitted_at=now if submitted else None, active_seconds=120,
        platform_assignment_id=assignment_id, platform_listing_id=hit.hit_id)


def test_sync_pages_through_assignments_and_flags_work_we_never_stored(mturk):
    study = make_study(units=1, overlap=3)
    hit, = _published(mturk, study, ["3HITA000000000000000"], max_assignments=3)
    stored, missing = WorkerFactory(), WorkerFactory()
    _stored(hit, stored, "3ASGA000000000000000")
    mturk.expect("list_assignments_for_hit", {
        "NextToken": "page2", "NumResults": 1,
        "Assignments": [assignment(assignment_id="3ASGA000000000000000", worker_id=stored.external_id,
                                   hit_id=hit.hit_id)]},
        {"HITId": hit.hit_id, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]})
    mturk.expect("list_assignments_for_hit", {
        "NumResults": 1,
        "Assignments": [assignment(assignment_id="3ASGB000000000000000", worker_id=missing.external_id,
                                   hit_id=hit.hit_id)]},
        {"HITId": hit.hit_id, "MaxResults": 100, "NextToken": "page2",
         "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]})
    counts = syncing.sync_study(study=study)
    mturk.done()
    assert counts == {"ready": 1, "flagged": 1}
    flagged = Submission.objects.get(worker=missing)
    assert "our pages stored nothing" in flagged.flag_reason
    assert Submission.objects.get(worker=stored).assignments.count() == 1


def test_a_returned_assignment_id_coming_back_for_another_worker_is_a_second_submission(mturk):
    study = make_study(units=1, overlap=2)
    hit, = _published(mturk, study, ["3HITA000000000000000"], max_assignments=2)
    first, second = WorkerFactory(), WorkerFactory()
    _stored(hit, second, "3ASGSAME000000000000")
    mturk.expect("list_assignments_for_hit", {"Assignments": [
        assignment(assignment_id="3ASGSAME000000000000", worker_id=first.external_id,
                   hit_id=hit.hit_id, status="Rejected"),
        assignment(assignment_id="3ASGSAME000000000000", worker_id=second.external_id, hit_id=hit.hit_id),
    ]})
    syncing.sync_study(study=study)
    assert Submission.objects.filter(platform_assignment_id="3ASGSAME000000000000").count() == 2
    assert Submission.objects.get(worker=second).review == Submission.Review.READY


def _ready_submission(mturk, study, hit):
    worker = WorkerFactory()
    _stored(hit, worker, "3ASGA000000000000000")
    mturk.expect("list_assignments_for_hit", {"Assignments": [
        assignment(assignment_id="3ASGA000000000000000", worker_id=worker.external_id, hit_id=hit.hit_id)]})
    syncing.sync_study(study=study)
    return Submission.objects.get(worker=worker)


def test_approval_checks_the_assignment_with_mturk_before_paying(mturk):
    study = make_study(units=1)
    hit, = _published(mturk, study, ["3HITA000000000000000"])
    submission = _ready_submission(mturk, study, hit)
    someone_else = WorkerFactory()
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id="3ASGA000000000000000", worker_id=someone_else.external_id, hit_id=hit.hit_id)},
        {"AssignmentId": "3ASGA000000000000000"})
    done, problems = reviewing.approve_submissions(submissions=[submission], actor=make_researcher())
    assert done == [] and "belongs to another worker" in problems[0]
    assert "ApproveAssignment" not in mturk.operations()
    assert AuditLog.objects.get(action="approve").ok is False
    mturk.done()


def test_flagged_work_is_never_approved(mturk):
    study = make_study(units=1)
    hit, = _published(mturk, study, ["3HITA000000000000000"])
    worker = WorkerFactory()
    mturk.expect("list_assignments_for_hit", {"Assignments": [
        assignment(assignment_id="3ASGA000000000000000", worker_id=worker.external_id, hit_id=hit.hit_id)]})
    syncing.sync_study(study=study)
    done, problems = reviewing.approve_submissions(
        submissions=list(Submission.objects.all()), actor=make_researcher())
    assert done == [] and "not ready for review" in problems[0]
    mturk.done()


def test_approve_reject_bonus_block_are_audited_and_bonus_is_never_paid_twice(mturk):
    study = make_study(units=1)
    hit_a, = _published(mturk, study, ["3HITA000000000000000"])
    good = _ready_submission(mturk, study, hit_a)
    researcher = make_researcher()
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id="3ASGA000000000000000", worker_id=good.worker.external_id, hit_id=hit_a.hit_id)})
    mturk.expect("approve_assignment", {}, {"AssignmentId": "3ASGA000000000000000",
                                            "RequesterFeedback": "Thank you!"})
    done, problems = reviewing.approve_submissions(submissions=[good], actor=researcher,
                                                  feedback="Thank you!")
    assert (len(done), problems) == (1, [])

    bonus = reviewing.create_bonus(submission=done[0], amount="0.25", reason="A detailed caption.",
                                  actor=researcher)
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id="3ASGA000000000000000", worker_id=good.worker.external_id,
        hit_id=hit_a.hit_id, status="Approved")})
    mturk.expect("send_bonus", {}, {"WorkerId": good.worker.external_id, "BonusAmount": "0.25",
                                    "AssignmentId": "3ASGA000000000000000",
                                    "Reason": "A detailed caption.",
                                    "UniqueRequestToken": f"crowdbench-bonus-{bonus.pk}"})
    reviewing.pay_bonus(bonus=bonus, actor=researcher)
    reviewing.pay_bonus(bonus=bonus, actor=researcher)  # a double click: no second SendBonus
    assert mturk.operations().count("SendBonus") == 1
    assert Bonus.objects.get().status == Bonus.Status.PAID

    mturk.expect("create_worker_block", {}, {"WorkerId": good.worker.external_id,
                                             "Reason": "Copied captions."})
    reviewing.block_worker(worker=good.worker, reason="Copied captions.", actor=researcher)
    assert list(queue.units_open_to(worker=good.worker, stage=Stage.CAPTION)) == []
    actions = list(AuditLog.objects.filter(ok=True).order_by("id").values_list("action", "amount_usd"))
    assert actions[-3:] == [("approve", Decimal("0.75")), ("bonus", Decimal("0.25")), ("block", None)]
    assert all(entry.actor == researcher
               for entry in AuditLog.objects.exclude(action__in=["publish", "sync"]))
    mturk.done()


def test_rejecting_needs_a_message(mturk):
    with pytest.raises(PlatformError, match="Say why"):
        reviewing.reject_submissions(submissions=[], actor=make_researcher(), message=" ")


def test_a_retried_approval_that_went_through_is_recorded_as_approved(mturk):
    study = make_study(units=1)
    hit, = _published(mturk, study, ["3HITA000000000000000"])
    submission = _ready_submission(mturk, study, hit)
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id="3ASGA000000000000000", worker_id=submission.worker.external_id, hit_id=hit.hit_id)})
    mturk.fail("approve_assignment", "RequestError", "This operation can be called with a status of: Submitted")
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id="3ASGA000000000000000", worker_id=submission.worker.external_id,
        hit_id=hit.hit_id, status="Approved")})
    done, _ = reviewing.approve_submissions(submissions=[submission], actor=make_researcher())
    assert done[0].review == Submission.Review.APPROVED
    mturk.done()


def test_a_hit_under_ten_assignments_cannot_be_extended_to_ten(mturk):
    study = make_study(units=1, overlap=3)
    hit, = _published(mturk, study, ["3HITA000000000000000"], max_assignments=3)
    with pytest.raises(PlatformError, match="cannot extend"):
        reviewing.extend_hit(hit=hit, more=7, actor=make_researcher())
    mturk.expect("create_additional_assignments_for_hit", {}, {
        "HITId": hit.hit_id, "NumberOfAdditionalAssignments": 6,
        "UniqueRequestToken": f"crowdbench-extend-{hit.pk}-9"})
    assert reviewing.extend_hit(hit=hit, more=6, actor=make_researcher("r2")).max_assignments == 9
    mturk.done()


def test_expire_sets_the_hits_expiry_in_the_past(mturk):
    study = make_study(units=1)
    hit, = _published(mturk, study, ["3HITA000000000000000"])
    mturk.expect("update_expiration_for_hit", {}, {"HITId": hit.hit_id, "ExpireAt": ANY})
    reviewing.expire_hits(study=study, actor=make_researcher())
    sent = dict(mturk.calls)["UpdateExpirationForHIT"]["ExpireAt"]
    assert sent < datetime.now(UTC)
    assert Hit.objects.get().status == Hit.Status.EXPIRED
    mturk.done()


def test_notify_workers_sends_at_most_100_ids_per_call(mturk):
    study = make_study(units=0)
    workers = [WorkerFactory() for _ in range(150)]
    mturk.expect("notify_workers", {"NotifyWorkersFailureStatuses": []})
    mturk.expect("notify_workers", {"NotifyWorkersFailureStatuses": []})
    reviewing.notify_workers(study=study, workers=workers, subject="New captions",
                            message="A new batch is up.", actor=make_researcher())
    sizes = [len(p["WorkerIds"]) for name, p in mturk.calls if name == "NotifyWorkers"]
    assert sizes == [100, 50]
    mturk.done()


def test_a_worker_gets_at_most_the_day_s_messages_and_nothing_is_sent_past_it(mturk, settings):
    settings.WORKER_MESSAGES_PER_DAY = 2
    study = make_study(units=0)
    often, new = WorkerFactory(external_id="A1OFTENMESSAGED01"), WorkerFactory()
    researcher = make_researcher()
    for _ in range(2):
        mturk.expect("notify_workers", {"NotifyWorkersFailureStatuses": []})
        reviewing.notify_workers(study=study, workers=[often], subject="New captions", message="Up.", actor=researcher)
    with pytest.raises(PlatformError, match=r"1 worker\(s\) had 2 message\(s\) .*A1OFTENMESSAGED01.*nothing was sent"):
        reviewing.notify_workers(study=study, workers=[often, new], subject="More", message="Up.", actor=researcher)
    mturk.done()
    mturk.expect("notify_workers", {"NotifyWorkersFailureStatuses": []})
    reviewing.notify_workers(study=study, workers=[new], subject="More", message="Up.", actor=researcher)
    mturk.done()


def test_a_repeated_notification_syncs_once(mturk):
    study = make_study(units=1)
    hit, = _published(mturk, study, ["3HITA000000000000000"])
    body = {"EventDocId": "ev-1", "EventDocVersion": "2014-08-15",
            "Events": [{"EventType": "AssignmentSubmitted", "HITId": hit.hit_id,
                        "AssignmentId": "3ASGA000000000000000"}]}
    mturk.expect("list_assignments_for_hit", {"Assignments": []})
    assert syncing.handle_mturk_notification(body) == 1
    assert syncing.handle_mturk_notification(body) == 0
    mturk.done()


def test_notifications_are_read_from_sqs_and_deleted_once_handled(mturk, settings):
    from botocore.stub import Stubber

    from mturk import client as mturk_client

    settings.MTURK_SQS_QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/mturk-events"
    sqs = mturk_client.get_sqs_client()
    body = '{"EventDocId": "ev-9", "Events": [{"EventType": "HITReviewable", "HITId": "3NOTOURS0000"}]}'
    with Stubber(sqs) as sqs_stub:
        sqs_stub.add_response("receive_message", {"Messages": [
            {"MessageId": "m1", "ReceiptHandle": "r1", "Body": body},
            {"MessageId": "m2", "ReceiptHandle": "r2", "Body": body}]},
            {"QueueUrl": settings.MTURK_SQS_QUEUE_URL, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 0})
        sqs_stub.add_response("delete_message", {}, {"QueueUrl": settings.MTURK_SQS_QUEUE_URL,
                                                     "ReceiptHandle": "r1"})
        sqs_stub.add_response("delete_message", {}, {"QueueUrl": settings.MTURK_SQS_QUEUE_URL,
                                                     "ReceiptHandle": "r2"})
        assert syncing.poll_mturk_notifications() == 2
        sqs_stub.assert_no_pending_responses()
    from mturk.models import NotificationEvent

    assert NotificationEvent.objects.filter(event_doc_id="ev-9").count() == 1
