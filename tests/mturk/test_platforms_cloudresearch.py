"""CloudResearch Connect through its API and its dashboard CSV, against a loopback server."""

import csv
import io
from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.crowdwork import review
from annotation.models import Assignment, Stage
from mturk import links
from mturk.models import CrowdStudy, Submission
from mturk.platforms.cloudresearch import payments_csv
from mturk.services import reviewing, syncing
from tests.factories import FamilyFactory, WorkerFactory, launch, submitted_in_study
from tests.mturk_wire import make_researcher

pytestmark = pytest.mark.django_db
PROJECT = "ee2a7726-0745-4952-8646-00ba758d57a9"


@pytest.fixture(autouse=True)
def public_base_url(settings):
    settings.PUBLIC_BASE_URL = "https://crowdbench.example.org"


def make_study():
    family = FamilyFactory()
    launch(family, Stage.PAIRWISE)
    return CrowdStudy.objects.create(platform="cloudresearch", stage=Stage.PAIRWISE, family=family,
                                     name="CHIRP-style preferences", external_id=PROJECT,
                                     completion_code="ABCD1234", reward_usd=Decimal("0.20"))


def participant(connect, study, pid, assignment_id, *, stored=True):
    worker = WorkerFactory(platform="cloudresearch", external_id=pid)
    connect.assignments[assignment_id] = {
        "participantId": pid, "assignmentId": assignment_id, "projectId": PROJECT,
        "startTime": "2026-11-20T10:00:00Z", "completionTime": "2026-11-20T10:02:00Z",
        "status": "Pending", "payment": 0.2, "bonus": 0,
        "completion": {"completionCode": None, "submissionType": "Redirect"}}
    if stored:
        submitted_in_study(study, worker, key=f"b-{pid}", platform_assignment_id=assignment_id)
    return worker


def test_study_link_and_completion_redirect():
    study = make_study()
    assert links.study_link(study).endswith(
        "/work/pairwise/?participantId={%PARTICIPANT_ID%}"
        "&assignmentId={%ASSIGNMENT_ID%}&projectId={%PROJECT_ID%}")
    assert links.completion_redirect(study) == (
        "https://connect.cloudresearch.com/participant/project/ABCD1234/complete")


def test_sync_approve_and_bonus_through_the_api_with_idempotency_tokens(connect):
    study = make_study()
    participant(connect, study, "P1001", "A2001")
    participant(connect, study, "P1002", "A2002", stored=False)
    assert syncing.sync_study(study=study) == {"ready": 1, "flagged": 1}
    researcher = make_researcher()
    ready = Submission.objects.get(review=Submission.Review.READY)
    done, problems = reviewing.approve_submissions(submissions=[ready], actor=researcher,
                                                  feedback="Thanks!")
    assert len(done) == 1 and problems == []
    assert connect.assignments["A2001"]["status"] == "Approved"
    bonus = reviewing.create_bonus(submission=done[0], amount="0.10", reason="Detailed reasons",
                                  actor=researcher)
    reviewing.pay_bonus(bonus=bonus, actor=researcher)
    assert connect.bonuses == [{"id": "A2001", "amount": 0.1, "message": "Detailed reasons"}]
    posts = [r for r in connect.requests if r[0] == "POST"]
    assert all(h["X-API-KEY"] == "connect-key" and h["IDEMPOTENCY-TOKEN"] for _, _, h, _ in posts)
    assert posts[-1][2]["IDEMPOTENCY-TOKEN"] == f"crowdbench-bonus-{bonus.pk}"


def test_the_dashboard_csv_lists_approvals_and_bonuses_safely(connect):
    study = make_study()
    participant(connect, study, "P1001", "A2001")
    syncing.sync_study(study=study)
    researcher = make_researcher()
    done, _ = reviewing.approve_submissions(submissions=list(Submission.objects.all()),
                                           actor=researcher, feedback="=HYPERLINK(\"x\")")
    reviewing.create_bonus(submission=done[0], amount="0.10", reason="r", actor=researcher)
    rows = list(csv.reader(io.StringIO(payments_csv(study))))
    assert rows[0] == ["participantId", "assignmentId", "status", "message", "bonus"]
    assert rows[1] == ["P1001", "A2001", "Approve", "'=HYPERLINK(\"x\")", "0.10"]


def test_the_study_admin_downloads_the_connect_payments_file_for_the_pay_permission_only(connect, client):
    study = make_study()
    participant(connect, study, "P1001", "A2001")
    syncing.sync_study(study=study)
    researcher = make_researcher()
    reviewing.approve_submissions(submissions=list(Submission.objects.all()), actor=researcher, feedback="Thanks")
    changelist = reverse("admin:mturk_crowdstudy_changelist")
    action = {"action": "connect_payments_csv", "_selected_action": [study.pk]}

    client.force_login(researcher)
    response = client.post(changelist, action)
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows == [["participantId", "assignmentId", "status", "message", "bonus"],
                    ["P1001", "A2001", "Approve", "Thanks", ""]]

    client.force_login(make_researcher("viewer", can_pay=False))
    refused = client.post(changelist, action)
    assert not refused.get("Content-Disposition")


def test_a_bulk_review_asks_connect_once_for_the_whole_batch(connect):
    study = make_study()
    for n in range(1, 5):
        participant(connect, study, f"P100{n}", f"A200{n}")
    assert syncing.sync_study(study=study) == {"ready": 4}
    answers = list(Assignment.objects.filter(platform_submissions__study=study))
    researcher = make_researcher()
    review.reject_work(assignments=answers, reviewer=researcher, reason="Answered without reading.")
    connect.requests.clear()

    lines = reviewing.review_on_platforms(assignments=answers, actor=researcher,
                                          reason="Answered without reading.")

    assert [(method, path.split("/api/v1/")[1]) for method, path, _, _ in connect.requests] == [
        ("GET", f"assignments/{PROJECT}"), ("POST", f"assignments/{PROJECT}/reject")]
    assert sorted(connect.requests[1][3]["participants"], key=lambda p: p["id"]) == [
        {"id": f"A200{n}", "message": "Answered without reading."} for n in range(1, 5)]
    assert len(lines) == 4 and all("was rejected there" in line for line in lines)
    assert {a["status"] for a in connect.assignments.values()} == {"Rejected"}
    assert set(Submission.objects.values_list("review", flat=True)) == {Submission.Review.REJECTED}
