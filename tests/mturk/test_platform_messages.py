"""Issue 24: every message a researcher is shown about a platform is true.

Nothing is called published, synced or paid unless the platform said so; every platform call,
failed or not, is in the audit log with its request and its answer or error; a platform without
credentials is named on the study page with the settings to set; and the Connect payments file
holds every participant owed an approval, synced or not. Platforms are reached through their real
clients: botocore (with no credentials at all, or its Stubber) and loopback Connect and Prolific.
"""

import csv
import io
from decimal import Decimal

import boto3
import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from annotation.crowdwork.stages import create_work_units
from annotation.models import Assignment, Stage, StageQualification, WorkerQualification, WorkUnit
from mturk import client as mturk_client
from mturk.exceptions import PlatformError
from mturk.models import AuditLog, Bonus, CrowdStudy, Hit, Submission
from mturk.platforms.cloudresearch import payments_csv
from mturk.services import publishing, qualifying, reviewing, syncing
from tests.factories import FamilyFactory, InstanceFactory, WorkerFactory, launch, submitted_in_study
from tests.mturk_wire import assignment, make_researcher

pytestmark = pytest.mark.django_db
PROJECT = "ee2a7726-0745-4952-8646-00ba758d57a9"
PROLIFIC_STUDY = "60f6acb180a7b59ac0621f9e"
CHANGELIST = "/admin/mturk/crowdstudy/"


@pytest.fixture(autouse=True)
def public_base_url(settings):
    settings.PUBLIC_BASE_URL = "https://crowdbench.example.org"


@pytest.fixture
def no_platform_keys(settings):
    settings.CLOUDRESEARCH_API_KEY = ""
    settings.PROLIFIC_API_TOKEN = ""


@pytest.fixture
def no_aws_credentials(settings, monkeypatch, tmp_path):
    """A machine as `make run` finds it: no MTurk keys in settings, the environment, AWS's files
    or an instance role, so botocore itself refuses to sign ("Unable to locate credentials")."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    settings.MTURK_ACCESS_KEY_ID = settings.MTURK_SECRET_ACCESS_KEY = ""
    settings.MTURK_ENDPOINT_URL = ""
    settings.MTURK_SANDBOX = True
    # boto3's default session keeps the credentials it found for an earlier test's client.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    mturk_client._clients.clear()
    yield
    mturk_client._clients.clear()


def _messages(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def _publish_in_admin(client, study, tasks):
    client.post(CHANGELIST, {"action": "publish_batch", "_selected_action": [study.pk], "index": "0"})
    done = client.post(CHANGELIST, {"action": "publish_batch", "_selected_action": [study.pk],
                                    "apply": "1", "tasks": str(tasks)}, follow=True)
    assert done.status_code == 200
    return _messages(done)


def _plain_action(client, action, study):
    done = client.post(CHANGELIST, {"action": action, "_selected_action": [study.pk], "index": "0"},
                       follow=True)
    assert done.status_code == 200
    return _messages(done)


def connect_study(**fields):
    family = FamilyFactory()
    InstanceFactory(family=family)
    launch(family, Stage.CAPTION)
    create_work_units(family=family, stage=Stage.CAPTION)  # work ready for the places published
    return CrowdStudy.objects.create(
        platform="cloudresearch", stage=Stage.CAPTION, family=family, name="Captions on Connect",
        external_id=PROJECT, completion_code="CRDONE7", reward_usd=Decimal("0.30"), **fields)


def prolific_study():
    family = FamilyFactory()
    InstanceFactory(family=family)
    launch(family, Stage.CAPTION)
    create_work_units(family=family, stage=Stage.CAPTION)  # work ready for the places published
    return CrowdStudy.objects.create(
        platform="prolific", stage=Stage.CAPTION, family=family, name="Captions on Prolific",
        external_id=PROLIFIC_STUDY, completion_code="C1ABCD23", reward_usd=Decimal("0.75"))


def mturk_study(*, units=1):
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    for n in range(units):
        WorkUnit.objects.create(stage=Stage.CAPTION, key=f"u{n}", family=family)
    return CrowdStudy.objects.create(
        platform="mturk", stage=Stage.CAPTION, family=family, name="Captions on MTurk",
        title="Describe an image for an instruction", description="Write a caption.",
        keywords="image, caption", reward_usd=Decimal("0.75"), requires_stage_qualification=False)


# --- publishing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("make, platform, setting", [
    (connect_study, "CloudResearch Connect", "CLOUDRESEARCH_API_KEY"),
    (prolific_study, "Prolific", "PROLIFIC_API_TOKEN"),
])
def test_publishing_places_without_credentials_says_nothing_was_sent_and_what_to_set(
        client, no_platform_keys, make, platform, setting):
    study = make()
    client.force_login(make_researcher())
    messages = _publish_in_admin(client, study, 10)
    assert not any("published" in m.lower() for m in messages), messages
    said, = [m for m in messages if "place(s)" in m]
    assert f"{study}: Recorded 10 place(s) (10 in all;" in said
    assert f"Nothing was sent to {platform}: open 10 more place(s) on its own site" in said
    assert f"{setting} is not set" in said
    row = AuditLog.objects.get(action="publish")
    assert (row.ok, row.sent_to_platform) == (True, False)
    assert f"nothing was sent to {platform}" in row.response["note"]
    assert "nothing sent" in str(row)
    assert CrowdStudy.objects.get().places_published == 10


def test_publishing_connect_places_with_its_key_still_says_nothing_was_sent(client, connect):
    study = connect_study()
    client.force_login(make_researcher())
    messages = _publish_in_admin(client, study, 3)
    said, = [m for m in messages if "place(s)" in m]
    assert "Nothing was sent to CloudResearch Connect" in said
    assert "CLOUDRESEARCH_API_KEY" not in said
    assert connect.requests == []
    assert AuditLog.objects.get().sent_to_platform is False


def test_the_publish_form_says_what_publishing_will_send_before_the_click(client, no_platform_keys):
    study = connect_study()
    client.force_login(make_researcher())
    form = client.post(CHANGELIST, {"action": "publish_batch", "_selected_action": [study.pk],
                                    "index": "0"}).content.decode()
    assert "CloudResearch Connect: nothing is sent." in form
    assert "CLOUDRESEARCH_API_KEY is not set" in form


def test_a_create_hit_type_refused_for_want_of_credentials_is_audited_and_not_called_published(
        client, no_aws_credentials):
    study = mturk_study()
    client.force_login(make_researcher())
    messages = _publish_in_admin(client, study, 1)
    assert not any("published" in m.lower() for m in messages), messages
    said, = [m for m in messages if "Unable to locate credentials" in m]
    assert said.startswith(f"{study}: MTurk was not called (create_hit_type)")
    assert "MTURK_ACCESS_KEY_ID and MTURK_SECRET_ACCESS_KEY" in said
    row = AuditLog.objects.get()
    assert (row.action, row.ok, row.sent_to_platform) == ("publish", False, False)
    call, = row.request["calls"]
    assert call["operation"] == "CreateHITType"
    assert call["request"]["Reward"] == "0.75" and call["request"]["Title"] == study.hit_title
    answer, = row.response["calls"]
    assert "Unable to locate credentials" in answer["error"] and answer["sent"] is False
    assert "Unable to locate credentials" in row.error
    assert not Hit.objects.exists()


def test_a_hit_mturk_refuses_is_audited_with_the_request_it_refused(mturk):
    study = mturk_study()
    mturk.expect("create_hit_type", {"HITTypeId": "3HITTYPE0000000000000"})
    mturk.fail("create_hit_with_hit_type", "RequestError", "Your account balance is insufficient.")
    with pytest.raises(PlatformError, match="insufficient"):
        publishing.publish_batch(study=study, tasks=1, actor=make_researcher())
    hit_type, hit = AuditLog.objects.order_by("id")
    assert (hit_type.ok, hit_type.response["HITTypeId"]) == (True, "3HITTYPE0000000000000")
    assert (hit.ok, hit.sent_to_platform) == (False, True)
    call, = hit.request["calls"]
    assert call["operation"] == "CreateHITWithHITType"
    assert call["request"]["UniqueRequestToken"] == f"crowdbench-hit-{study.pk}-{hit.request['unit']}"
    assert "insufficient" in hit.response["calls"][0]["error"]
    mturk.done()


# --- what the study page says before anything is clicked -----------------------------------------


@pytest.mark.parametrize("make, setting", [
    (connect_study, "CLOUDRESEARCH_API_KEY is not set, so nothing is sent to CloudResearch Connect"),
    (prolific_study, "PROLIFIC_API_TOKEN is not set, so nothing is sent to Prolific"),
])
def test_the_study_page_says_which_setting_is_missing(client, no_platform_keys, make, setting):
    study = make()
    client.force_login(make_researcher())
    page = client.get(reverse("admin:mturk_crowdstudy_change", args=[study.pk]))
    assert any(setting in m for m in _messages(page))


def test_the_mturk_study_page_says_no_credentials_were_found_and_what_to_set(client,
                                                                             no_aws_credentials):
    study = mturk_study()
    client.force_login(make_researcher())
    page = client.get(reverse("admin:mturk_crowdstudy_change", args=[study.pk]))
    notice, = [m for m in _messages(page) if "No MTurk credentials" in m]
    assert "MTURK_ACCESS_KEY_ID and MTURK_SECRET_ACCESS_KEY" in notice
    listing = client.get(CHANGELIST).content.decode()
    assert "not asked: no MTurk credentials were found" in listing


def test_a_study_page_with_its_platforms_key_set_raises_no_alarm(client, connect):
    study = connect_study()
    client.force_login(make_researcher())
    page = client.get(reverse("admin:mturk_crowdstudy_change", args=[study.pk]))
    assert not any("is not set" in m for m in _messages(page))


def test_a_study_on_a_platform_nothing_is_published_on_leaves_the_studies_page_working(client):
    CrowdStudy.objects.create(platform="import", stage=Stage.CAPTION, name="Imported captions")
    client.force_login(make_researcher())
    assert client.get(CHANGELIST).status_code == 200


# --- syncing ---------------------------------------------------------------------------------------


def test_a_sync_is_audited_with_the_calls_it_made_and_what_came_back(connect):
    study = connect_study()
    connect.assignments["A2001"] = {
        "participantId": "P1001", "assignmentId": "A2001", "projectId": PROJECT,
        "completionTime": "2026-11-20T10:02:00Z", "status": "Pending"}
    assert syncing.sync_study(study=study) == {"flagged": 1}
    row = AuditLog.objects.get()
    assert (row.action, row.ok, row.sent_to_platform) == ("sync", True, True)
    assert row.request["calls"][0]["operation"] == f"GET assignments/{PROJECT}"
    assert row.response["calls"][0]["response"]["assignments"][0]["assignmentId"] == "A2001"
    assert row.response["by_review"] == {"flagged": 1}


def test_a_sync_without_credentials_is_audited_as_nothing_sent_and_never_called_synced(
        client, no_platform_keys):
    study = connect_study()
    client.force_login(make_researcher())
    messages = _plain_action(client, "sync", study)
    assert not any("synced" in m for m in messages), messages
    assert any("Nothing was sent to CloudResearch Connect: CLOUDRESEARCH_API_KEY is not set" in m
               for m in messages)
    row = AuditLog.objects.get()
    assert (row.action, row.ok, row.sent_to_platform) == ("sync", False, False)
    assert "CLOUDRESEARCH_API_KEY" in row.error


def test_a_failed_mturk_sync_is_audited(mturk, settings):
    settings.MTURK_MAX_ATTEMPTS = 1
    study = mturk_study()
    hit = Hit.objects.create(study=study, unit=WorkUnit.objects.get(), hit_id="3HITA000000000000000",
                             environment="sandbox", max_assignments=1, reward_usd="0.75",
                             status=Hit.Status.OPEN)
    mturk.fail("list_assignments_for_hit", "ServiceFault", "Internal error", status=500)
    with pytest.raises(PlatformError, match="did not answer"):
        syncing.sync_study(study=study)
    row = AuditLog.objects.get()
    assert (row.action, row.ok) == ("sync", False)
    assert row.request["hits"] == [hit.hit_id]
    assert row.request["calls"][0]["request"]["HITId"] == hit.hit_id
    mturk.done()


def test_an_mturk_study_without_hits_is_not_called_synced(client, mturk):
    study = mturk_study()
    client.force_login(make_researcher())
    messages = _plain_action(client, "sync", study)
    assert not any("synced" in m for m in messages), messages
    assert any("Nothing to sync: the study has no HITs on MTurk yet" in m for m in messages)
    assert "ListAssignmentsForHIT" not in mturk.operations()


def test_the_periodic_sync_leaves_platforms_without_credentials_alone(no_platform_keys):
    study = connect_study()
    CrowdStudy.objects.filter(pk=study.pk).update(places_published=10)
    assert syncing.sync_open_studies() == {study.pk: {"skipped": "CLOUDRESEARCH_API_KEY not set"}}
    assert not AuditLog.objects.exists()


# --- reviewing and paying ------------------------------------------------------------------------------


def _ready(study, pid, assignment_id):
    worker = WorkerFactory(platform=study.platform, external_id=pid)
    submitted_in_study(study, worker, key=f"k-{pid}", platform_assignment_id=assignment_id)
    return Submission.objects.create(study=study, worker=worker, review=Submission.Review.READY,
                                     platform_assignment_id=assignment_id, platform_status="Pending")


def test_an_approval_that_cannot_be_sent_is_audited_as_nothing_sent(no_platform_keys):
    study = connect_study()
    submission = _ready(study, "P1001", "A2001")
    done, problems = reviewing.approve_submissions(submissions=[submission], actor=make_researcher())
    assert done == [] and "CLOUDRESEARCH_API_KEY is not set" in problems[0]
    row = AuditLog.objects.get()
    assert (row.action, row.ok, row.sent_to_platform) == ("approve", False, False)
    assert row.request == {"assignment": "A2001"}
    assert Submission.objects.get().review == Submission.Review.READY


def test_work_the_platform_already_approved_is_not_approved_again_and_the_check_is_audited(mturk):
    study = mturk_study()
    hit = Hit.objects.create(study=study, unit=WorkUnit.objects.get(), hit_id="3HITA000000000000000",
                             environment="sandbox", max_assignments=1, reward_usd="0.75",
                             status=Hit.Status.OPEN)
    worker = WorkerFactory()
    submission = Submission.objects.create(study=study, worker=worker, hit=hit,
                                           review=Submission.Review.READY,
                                           platform_assignment_id="3ASGA000000000000000")
    mturk.expect("get_assignment", {"Assignment": assignment(
        assignment_id="3ASGA000000000000000", worker_id=worker.external_id, hit_id=hit.hit_id,
        status="Approved")})
    done, problems = reviewing.approve_submissions(submissions=[submission], actor=make_researcher())
    assert done == [] and "the platform says Approved" in problems[0]
    row = AuditLog.objects.get()
    assert (row.action, row.ok) == ("approve", False)
    assert row.request["calls"][0]["operation"] == "GetAssignment"
    assert row.response["calls"][0]["response"]["Assignment"]["AssignmentStatus"] == "Approved"
    mturk.done()


def test_a_prolific_bonus_whose_set_up_fails_is_audited(prolific):
    study = prolific_study()
    submission = _ready(study, "60ffe5c8371090c7041d43f0", "subunknown")
    Submission.objects.filter(pk=submission.pk).update(review=Submission.Review.APPROVED)
    submission.refresh_from_db()
    researcher = make_researcher()
    bonus = reviewing.create_bonus(submission=submission, amount="0.50", reason="Thorough work",
                                   actor=researcher)
    with pytest.raises(PlatformError, match="refused GET submissions/subunknown/"):
        reviewing.pay_bonus(bonus=bonus, actor=researcher)
    row = AuditLog.objects.get()
    assert (row.action, row.ok, row.sent_to_platform) == ("bonus", False, True)
    assert row.error.startswith("not set up, nothing paid")
    assert row.request["calls"][0]["operation"] == "GET submissions/subunknown/"
    assert Bonus.objects.get().status == Bonus.Status.PENDING
    assert prolific.payments == []


def test_a_prolific_bonus_pay_step_never_sent_may_be_sent_again(prolific, settings):
    study = prolific_study()
    worker = WorkerFactory(platform="prolific", external_id="60ffe5c8371090c7041d43f0")
    prolific.submissions["sub1"] = {"id": "sub1", "participant_id": worker.external_id,
                                    "study_id": PROLIFIC_STUDY, "status": "APPROVED"}
    submission = Submission.objects.create(study=study, worker=worker, platform_assignment_id="sub1",
                                           review=Submission.Review.APPROVED)
    bonus = Bonus.objects.create(submission=submission, amount_usd="0.50", reason="r",
                                 status=Bonus.Status.SET_UP, platform_reference="bonus000001")
    settings.PROLIFIC_API_TOKEN = ""
    with pytest.raises(PlatformError, match="PROLIFIC_API_TOKEN is not set"):
        reviewing.pay_bonus(bonus=bonus, actor=make_researcher())
    assert Bonus.objects.get().status == Bonus.Status.SET_UP
    row = AuditLog.objects.get()
    assert (row.ok, row.sent_to_platform) == (False, False)
    assert "outcome unknown" not in row.error


def test_a_block_mturk_cannot_answer_is_audited_and_not_made(mturk, settings):
    settings.MTURK_MAX_ATTEMPTS = 1
    worker = WorkerFactory()
    mturk.fail("create_worker_block", "ServiceFault", "Internal error", status=500)
    with pytest.raises(PlatformError):
        reviewing.block_worker(worker=worker, reason="Copied captions.", actor=make_researcher())
    row = AuditLog.objects.get()
    assert (row.action, row.ok) == ("block", False)
    assert row.request["calls"][0]["request"] == {"WorkerId": worker.external_id,
                                                  "Reason": "Copied captions."}
    assert not worker.blocks.exists()
    mturk.done()


def test_a_message_that_cannot_be_sent_is_audited_and_the_admin_says_so(client, no_platform_keys):
    study = prolific_study()
    submission = _ready(study, "60ffe5c8371090c7041d43f0", "sub1")
    client.force_login(make_researcher())
    url = "/admin/mturk/submission/"
    client.post(url, {"action": "notify", "_selected_action": [submission.pk], "index": "0"})
    done = client.post(url, {"action": "notify", "_selected_action": [submission.pk], "apply": "1",
                             "subject": "New batch", "message": "More captions are up."}, follow=True)
    messages = _messages(done)
    assert any("PROLIFIC_API_TOKEN is not set" in m for m in messages), messages
    assert not any("accepted the message" in m for m in messages)
    row = AuditLog.objects.get()
    assert (row.action, row.ok, row.sent_to_platform) == ("notify", False, False)


def test_a_message_mturk_accepts_is_counted_and_audited(mturk):
    study = mturk_study(units=0)
    workers = [WorkerFactory() for _ in range(2)]
    mturk.expect("notify_workers", {"NotifyWorkersFailureStatuses": []})
    notified = reviewing.notify_workers(study=study, workers=workers, subject="New batch",
                                        message="More captions are up.", actor=make_researcher())
    assert notified.message == "MTurk accepted the message for 2 of 2 worker(s)."
    row = AuditLog.objects.get()
    assert (row.action, row.ok, row.sent_to_platform) == ("notify", True, True)
    mturk.done()


def test_an_expiry_mturk_refuses_is_audited_and_the_hit_stays_open(mturk, settings):
    settings.MTURK_MAX_ATTEMPTS = 1
    study = mturk_study()
    Hit.objects.create(study=study, unit=WorkUnit.objects.get(), hit_id="3HITA000000000000000",
                       environment="sandbox", max_assignments=1, reward_usd="0.75",
                       status=Hit.Status.OPEN)
    mturk.fail("update_expiration_for_hit", "ServiceFault", "Internal error", status=500)
    with pytest.raises(PlatformError, match="Expired 0 of 1 open HIT"):
        reviewing.expire_hits(study=study, actor=make_researcher())
    row = AuditLog.objects.get()
    assert (row.action, row.ok) == ("expire", False)
    assert Hit.objects.get().status == Hit.Status.OPEN
    mturk.done()


def test_extra_assignments_mturk_refuses_are_audited_and_not_counted(mturk):
    study = mturk_study()
    hit = Hit.objects.create(study=study, unit=WorkUnit.objects.get(), hit_id="3HITA000000000000000",
                             environment="sandbox", max_assignments=2, reward_usd="0.75",
                             status=Hit.Status.OPEN)
    mturk.fail("create_additional_assignments_for_hit", "RequestError", "The HIT has expired.")
    with pytest.raises(PlatformError, match="expired"):
        reviewing.extend_hit(hit=hit, more=1, actor=make_researcher())
    row = AuditLog.objects.get()
    assert (row.action, row.ok, row.sent_to_platform) == ("extend", False, True)
    assert Hit.objects.get().max_assignments == 2
    mturk.done()


def test_a_qualification_mturk_refuses_is_audited_with_every_call_it_took(mturk):
    qualification = StageQualification.objects.create(
        stage=Stage.CAPTION, name="Caption qualification", description="Five captions to check.")
    worker = WorkerFactory()
    granted = WorkerQualification.objects.create(qualification=qualification, worker=worker,
                                                 test_score=Decimal("0.900"))
    mturk.expect("create_qualification_type",
                 {"QualificationType": {"QualificationTypeId": "3QUAL00000000000000000"}})
    mturk.fail("associate_qualification_with_worker", "RequestError", "Worker does not exist.")
    assert qualifying.grant_mturk_qualification(granted) is False
    row = AuditLog.objects.get()
    assert (row.action, row.ok, row.sent_to_platform) == ("qualify", False, True)
    assert [c["operation"] for c in row.request["calls"]] == [
        "CreateQualificationType", "AssociateQualificationWithWorker"]
    assert row.response["calls"][0]["response"]["QualificationType"]["QualificationTypeId"] == (
        "3QUAL00000000000000000")
    assert "Worker does not exist" in row.response["calls"][1]["error"]
    mturk.done()


# --- the Connect payments file -----------------------------------------------------------------------


def test_the_connect_csv_holds_every_participant_who_finished_though_nothing_was_synced(
        no_platform_keys):
    study = connect_study()
    first = WorkerFactory(platform="cloudresearch", external_id="P1001")
    second = WorkerFactory(platform="cloudresearch", external_id="P1002")
    submitted_in_study(study, first, key="c1", platform_assignment_id="A2001")
    submitted_in_study(study, first, key="c2", platform_assignment_id="A2001")  # same visit
    submitted_in_study(study, second, key="c3", platform_assignment_id="A2002")
    # Work that is not owed: only leased, or done for another study.
    leased = submitted_in_study(study, WorkerFactory(platform="cloudresearch", external_id="P1003"),
                                key="c4", platform_assignment_id="A2003")
    Assignment.objects.filter(pk=leased.pk).update(status=Assignment.Status.LEASED)
    other = CrowdStudy.objects.create(platform="cloudresearch", stage=Stage.CAPTION, name="other",
                                      family=study.family,
                                      external_id="PRJ-OTHER")
    submitted_in_study(other, WorkerFactory(platform="cloudresearch", external_id="P1004"), key="c5",
                       platform_assignment_id="A2004")
    rows = list(csv.reader(io.StringIO(payments_csv(study))))
    assert rows == [["participantId", "assignmentId", "status", "message", "bonus"],
                    ["P1001", "A2001", "Approve", "", ""],
                    ["P1002", "A2002", "Approve", "", ""]]


def test_a_synced_participant_keeps_their_review_and_is_listed_once(connect):
    study = connect_study()
    worker = WorkerFactory(platform="cloudresearch", external_id="P1001")
    submitted_in_study(study, worker, key="c1", platform_assignment_id="A2001")
    submitted_in_study(study, WorkerFactory(platform="cloudresearch", external_id="P1002"), key="c2",
                       platform_assignment_id="A2002")
    connect.assignments["A2001"] = {
        "participantId": "P1001", "assignmentId": "A2001", "projectId": PROJECT,
        "completionTime": "2026-11-20T10:02:00Z", "status": "Pending"}
    syncing.sync_study(study=study)
    researcher = make_researcher()
    done, _ = reviewing.approve_submissions(submissions=list(Submission.objects.all()),
                                            actor=researcher, feedback="Thanks")
    reviewing.create_bonus(submission=done[0], amount="0.10", reason="r", actor=researcher)
    rows = list(csv.reader(io.StringIO(payments_csv(study))))
    assert rows[1:] == [["P1001", "A2001", "Approve", "Thanks", "0.10"],
                        ["P1002", "A2002", "Approve", "", ""]]
