"""A researcher's whole round on MTurk through the Django admin, MTurk stubbed at its wire:
publish → the worker submits on our page → sync → approve → bonus, every step in the audit log."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from botocore.stub import ANY
from django.contrib.messages import get_messages

from annotation.collection.captions import submit_caption
from annotation.crowdwork.queue import lease_unit
from annotation.models import Stage, StageConfig, StageQualification, WorkerQualification, WorkUnit
from mturk.models import AuditLog, CrowdStudy, Hit, Submission
from tests.factories import FamilyFactory, InstanceFactory, WorkerFactory, launch
from tests.mturk_wire import assignment, make_researcher

pytestmark = pytest.mark.django_db

HIT_TYPE, HIT, ASSIGNMENT = "3HITTYPE00000000000000", "3HIT0000000000000000AA", "3ASSIGN000000000000AA"


def _messages(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def _plain_action(client, model, action, ids):
    done = client.post(f"/admin/mturk/{model}/",
                       {"action": action, "_selected_action": ids, "index": "0"}, follow=True)
    assert done.status_code == 200
    return _messages(done)


def _action(client, model, action, ids, **form):
    url = f"/admin/mturk/{model}/"
    asked = client.post(url, {"action": action, "_selected_action": ids, "index": "0"})
    assert asked.status_code == 200  # the action's form
    done = client.post(url, {"action": action, "_selected_action": ids, "apply": "1", **form},
                       follow=True)
    assert done.status_code == 200
    return _messages(done)


def test_publish_submit_sync_approve_bonus_through_the_admin(client, mturk, capsys):
    log = []
    family = FamilyFactory(name="Contextual knowledge of events")
    instance = InstanceFactory(family=family)
    launch(family, Stage.CAPTION)
    unit = WorkUnit.objects.create(stage=Stage.CAPTION, key=f"instance-{instance.pk}-round-1",
                                   family=family, instance=instance)
    qualification = StageQualification.objects.create(
        stage=Stage.CAPTION, name="Caption qualification", description="Five sample captions.")
    worker = WorkerFactory(external_id="A1CROWDWORKER0001")
    WorkerQualification.objects.create(qualification=qualification, worker=worker, test_score="0.900")
    study = CrowdStudy.objects.create(
        platform="mturk", stage=Stage.CAPTION, family=family, name="VisIT captions, batch 1",
        title="Describe an image so that someone can follow an instruction",
        description="Write a caption", keywords="image, caption", reward_usd=Decimal("0.75"),
        budget_usd=Decimal("100.00"))
    researcher = make_researcher()
    client.force_login(researcher)

    # The studies page: which MTurk is live, and the balance.
    mturk.expect("get_account_balance", {"AvailableBalance": "10000.00"})
    page = client.get("/admin/mturk/crowdstudy/")
    assert b"MTurk SANDBOX" in page.content and b"$10000.00" in page.content
    log.append("studies page: MTurk SANDBOX, balance $10000.00")

    # Publish.
    mturk.expect("create_qualification_type",
                 {"QualificationType": {"QualificationTypeId": "3CAPTIONQUAL0000000000"}})
    mturk.expect("create_hit_type", {"HITTypeId": HIT_TYPE})
    mturk.expect("create_hit_with_hit_type", {"HIT": {
        "HITId": HIT, "HITTypeId": HIT_TYPE, "Expiration": datetime.now(UTC) + timedelta(days=3)}},
        {"HITTypeId": HIT_TYPE, "MaxAssignments": 1, "LifetimeInSeconds": 72 * 3600, "Question": ANY,
         "RequesterAnnotation": f"crowdbench unit {unit.pk}",
         "UniqueRequestToken": f"crowdbench-hit-{study.pk}-{unit.pk}"})
    messages = _action(client, "crowdstudy", "publish_batch", [study.pk], tasks="1")
    log.append(f"publish: {messages}")
    hit = Hit.objects.get()
    assert hit.hit_id == HIT

    # The worker takes the HIT on our page (MTurk passes assignmentId, hitId, workerId).
    leased = lease_unit(worker=worker, unit=unit)
    leased.platform_assignment_id, leased.platform_listing_id = ASSIGNMENT, HIT
    leased.save(update_fields=["platform_assignment_id", "platform_listing_id"])
    submit_caption(assignment_id=leased.pk, worker=worker, active_seconds=140,
                   texts=["A crowd of protesters holds signs while a man on a stage waves at them."])
    log.append(f"worker {worker.pseudonym} submitted assignment {ASSIGNMENT} on our page")

    # Sync.
    mturk.expect("list_assignments_for_hit", {"NumResults": 1, "Assignments": [
        assignment(assignment_id=ASSIGNMENT, worker_id=worker.external_id, hit_id=HIT)]},
        {"HITId": HIT, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]})
    messages = _plain_action(client, "crowdstudy", "sync", [study.pk])
    log.append(f"sync: {messages}")
    submission = Submission.objects.get()
    assert submission.review == Submission.Review.READY

    # Approve from the review queue, after GetAssignment confirms the worker.
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id=ASSIGNMENT, worker_id=worker.external_id, hit_id=HIT)},
        {"AssignmentId": ASSIGNMENT})
    mturk.expect("approve_assignment", {}, {"AssignmentId": ASSIGNMENT,
                                            "RequesterFeedback": "Thank you, a clear caption."})
    messages = _action(client, "submission", "approve", [submission.pk],
                       feedback="Thank you, a clear caption.")
    log.append(f"approve: {messages}")

    # Bonus.
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id=ASSIGNMENT, worker_id=worker.external_id, hit_id=HIT, status="Approved")})
    mturk.expect("send_bonus", {}, {"WorkerId": worker.external_id, "BonusAmount": "0.25",
                                    "AssignmentId": ASSIGNMENT, "Reason": "An especially detailed caption.",
                                    "UniqueRequestToken": ANY})
    messages = _action(client, "submission", "bonus", [submission.pk], amount="0.25",
                       reason="An especially detailed caption.")
    log.append(f"bonus: {messages}")
    mturk.done()

    assert client.get("/admin/mturk/auditlog/").status_code == 200
    entries = list(AuditLog.objects.order_by("id"))
    # The HIT type and the HIT are each a call of their own; the sync is audited like the rest.
    assert [(e.action, e.ok) for e in entries] == [("publish", True), ("publish", True), ("sync", True),
                                                   ("approve", True), ("bonus", True)]
    assert all(e.actor == researcher and e.sent_to_platform for e in entries)
    assert [c["operation"] for c in entries[0].request["calls"]] == ["CreateQualificationType",
                                                                   "CreateHITType"]
    log.append("MTurk calls: " + ", ".join(mturk.operations()))
    for e in entries:
        log.append(f"audit: {e.created_at:%H:%M:%S} {e.action} by {e.actor.username} "
                   f"amount={e.amount_usd} ok={e.ok} response={e.response}")
    assert StageConfig.objects.get(family=family, stage=Stage.CAPTION).launched_at
    with capsys.disabled():
        print("\n--- admin round: publish → submit → sync → approve → bonus (stubbed MTurk) ---")
        print("\n".join(log))


def test_staff_without_the_pay_permission_cannot_approve(client, mturk):
    from django.contrib.auth.models import Permission

    study = CrowdStudy.objects.create(platform="mturk", stage=Stage.CAPTION, name="s")
    worker = WorkerFactory()
    submission = Submission.objects.create(study=study, worker=worker, review=Submission.Review.READY,
                                           platform_assignment_id="3ASSIGN0000000000000BB")
    viewer = make_researcher("viewer", can_pay=False)
    viewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_submission",
                                                                         "view_crowdstudy"]))
    client.force_login(viewer)
    page = client.get("/admin/mturk/submission/")
    assert page.status_code == 200
    assert b'value="approve"' not in page.content and b'value="bonus"' not in page.content
    # The worker's platform id never shows in the review queue; the pseudonym does.
    assert worker.pseudonym.encode() in page.content
    assert worker.external_id.encode() not in page.content
    response = client.post("/admin/mturk/submission/", {
        "action": "approve", "_selected_action": [submission.pk], "apply": "1"}, follow=True)
    assert response.status_code == 200
    assert not AuditLog.objects.exists()
    assert Submission.objects.get().review == Submission.Review.READY
    mturk.done()


@pytest.mark.parametrize("platform", ["mturk", "prolific", "cloudresearch", "toloka"])
def test_a_new_studys_form_says_its_links_come_once_it_is_saved(admin_client, platform):
    page = admin_client.get(f"/admin/mturk/crowdstudy/add/?platform={platform}").content.decode()
    assert page.count("Shown once the study is saved.") == 2
    assert "have no study link" not in page and "have no completion redirect" not in page
