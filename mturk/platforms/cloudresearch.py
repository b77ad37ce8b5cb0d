"""CloudResearch Connect: participants arrive by project link; approvals and bonuses through its
API (X-API-KEY, IDEMPOTENCY-TOKEN), or a CSV for its dashboard."""

import csv
import io
from decimal import Decimal

from django.conf import settings
from django.db.models import Min
from django.utils.dateparse import parse_datetime

from annotation.datasets.exports import neutralise_formula
from annotation.models import Worker
from mturk.exceptions import PlatformError
from mturk.models import short_hash
from mturk.platforms.base import (
    Backend,
    CallResult,
    LinkParameter,
    PlatformRecord,
    State,
    StudyLinkParameters,
)
from mturk.platforms.http import JsonApi

STATES = {"Pending": State.SUBMITTED, "Approved": State.APPROVED, "Rejected": State.REJECTED}
LINK_PARAMETERS = StudyLinkParameters(
    participant=LinkParameter("participantId", "{%PARTICIPANT_ID%}"),
    study=LinkParameter("projectId", "{%PROJECT_ID%}"),
    session=LinkParameter("assignmentId", "{%ASSIGNMENT_ID%}"),
    order=("participant", "session", "study"),
)


class ConnectApi(JsonApi):
    name = "CloudResearch Connect"

    def __init__(self):
        if not settings.CLOUDRESEARCH_API_KEY:
            raise PlatformError(
                "Nothing was sent to CloudResearch Connect: CLOUDRESEARCH_API_KEY is not set. Set it "
                "to sync, approve, reject and bonus through Connect's API, or download the approvals "
                "and bonuses CSV for Connect's dashboard.", sent=False)
        super().__init__(settings.CLOUDRESEARCH_API_URL, {"X-API-KEY": settings.CLOUDRESEARCH_API_KEY})

    def post(self, path, body, *, token):
        # The same IDEMPOTENCY-TOKEN makes a retried POST safe, so it is retried.
        return self.request("POST", path, json=body, headers={"IDEMPOTENCY-TOKEN": token})


class CloudResearchBackend(Backend):
    platform = Worker.Platform.CLOUDRESEARCH
    label = "CloudResearch Connect"
    credential_settings = ("CLOUDRESEARCH_API_KEY",)
    without_credentials = ("approve and bonus with the approvals and bonuses CSV (a study action) "
                           "uploaded on Connect's dashboard")
    link_parameters = LINK_PARAMETERS
    completion_url_setting = "CLOUDRESEARCH_COMPLETE_URL"
    study_defaults = {**Backend.study_defaults, "auto_approval_days": 14}
    # Connect's published rate for academics and non-profits: 25%, 40% for other researchers.
    assumed_fee_rate = Decimal("0.25")
    assumed_fee_reason = "its academic and non-profit rate (40% for other researchers)"
    give_back_step = "return the study on CloudResearch, so that your place goes to someone else"

    def _project(self, study):
        if not study.external_id:
            raise PlatformError(f"Study “{study.name}” has no CloudResearch project id yet.")
        return study.external_id

    def confirms_participant(self, study, *, participant_id, session_id):
        # Connect has no call for one assignment: the project's list names each one's participant.
        body = ConnectApi().request("GET", f"assignments/{study.external_id}")
        return any(item.get("assignmentId") == session_id and item.get("participantId") == participant_id
                   for item in (body.get("assignments") or [] if isinstance(body, dict) else []))

    def records(self, study, *, hits=None):
        body = ConnectApi().request("GET", f"assignments/{self._project(study)}")
        return [self._record(item) for item in (body.get("assignments") or [])]

    def _record(self, item):
        submitted = item.get("completionTime")
        return PlatformRecord(
            assignment_id=item.get("assignmentId") or "", worker_id=item.get("participantId") or "",
            state=STATES.get(item.get("status"), State.IN_PROGRESS) if submitted or
            item.get("status") != "Pending" else State.IN_PROGRESS,
            platform_status=item.get("status", ""),
            submitted_at=parse_datetime(submitted) if submitted else None, raw=item,
        )

    def verify(self, submission):
        return self.verify_batch([submission])[submission.pk]

    def verify_batch(self, submissions):
        # Connect lists a project's assignments in one answer and has no call for one of them, so a
        # batch is checked against one download of the list.
        if not submissions:
            return {}
        listed = {record.assignment_id: record for record in self.records(submissions[0].study)}
        return {submission.pk: self._confirm(submission, listed) for submission in submissions}

    def _confirm(self, submission, listed):
        record = listed.get(submission.platform_assignment_id)
        if record is None:
            raise PlatformError(f"Connect does not list assignment {submission.platform_assignment_id} "
                                "in this project; nothing was paid.")
        if record.worker_id != submission.worker.external_id:
            raise PlatformError(f"Connect assignment {record.assignment_id} belongs to "
                                "another participant; nothing was paid.")
        return record

    def _review(self, submissions, action, message):
        if not submissions:
            return {}
        project = submissions[0].study.external_id
        body = {"participants": [{"id": s.platform_assignment_id, "message": message}
                                 for s in submissions]}
        token = short_hash(action, project, sorted(s.platform_assignment_id for s in submissions))
        response = ConnectApi().post(f"assignments/{project}/{action}", body, token=token)
        result = CallResult(ok=True, request={**body, "IDEMPOTENCY-TOKEN": token},
                            response=response if isinstance(response, dict) else {"body": response})
        return {s.pk: result for s in submissions}

    def approve(self, submissions, *, feedback):
        return self._review(submissions, "approve", feedback)

    def reject(self, submissions, *, message, category=""):
        if not message.strip():
            raise PlatformError("Connect needs a message saying why work is rejected.")
        return self._review(submissions, "reject", message)

    def payments_csv(self, study):
        return payments_csv(study)

    def pay_bonus(self, bonus):
        submission = bonus.submission
        body = {"bonusPayment": [{"id": submission.platform_assignment_id,
                                  "amount": float(bonus.amount_usd), "message": bonus.reason}]}
        response = ConnectApi().post(f"assignments/{self._project(submission.study)}/bonus", body,
                                     token=bonus.request_token)
        return CallResult(ok=True, request={**body, "IDEMPOTENCY-TOKEN": bonus.request_token},
                          response=response if isinstance(response, dict) else {"body": response})


def payments_csv(study):
    """Approvals and bonuses as Connect's dashboard takes them: one row per Connect assignment,
    with its participant id, assignment id, decision and bonus. Platform ids are needed to pay, so
    this file is for the Connect dashboard only, never for sharing.

    It holds every assignment whose work is owed an approval or a bonus: those synced from Connect
    (their review decides the row), and those our own pages stored through the study link that
    were never synced, as with no CLOUDRESEARCH_API_KEY nothing ever is. A Connect assignment is
    the participant's whole visit, however many tasks they did in it."""
    from mturk.models import Bonus, Submission

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["participantId", "assignmentId", "status", "message", "bonus"])
    submissions = study.submissions.select_related("worker").filter(
        review__in=[Submission.Review.APPROVED, Submission.Review.REJECTED, Submission.Review.READY])
    for submission in submissions:
        bonus = sum(b.amount_usd for b in submission.bonuses.exclude(status=Bonus.Status.FAILED))
        status = {"approved": "Approve", "rejected": "Reject"}.get(submission.review, "Approve")
        writer.writerow([submission.worker.external_id, submission.platform_assignment_id, status,
                         neutralise_formula(submission.feedback), f"{bonus:.2f}" if bonus else ""])
    synced = set(study.submissions.values_list("worker_id", "platform_assignment_id"))
    for row in _stored_not_synced(study):
        if (row["worker_id"], row["platform_assignment_id"]) not in synced:
            writer.writerow([row["worker__external_id"], row["platform_assignment_id"], "Approve",
                             "", ""])
    return out.getvalue()


def _stored_not_synced(study):
    """Each (participant, Connect assignment) under which our pages stored submitted work of the
    study, in the order it was first done."""
    from annotation.models import Assignment

    if not study.external_id:
        return []
    return (Assignment.objects.filter(
        status=Assignment.Status.SUBMITTED, unit__stage=study.stage,
        platform_listing_id=study.external_id, worker__platform=CloudResearchBackend.platform)
        .exclude(platform_assignment_id="")
        .values("worker_id", "worker__external_id", "platform_assignment_id")
        .annotate(first=Min("pk")).order_by("first"))
