"""Prolific: participants arrive by study link; approval, rejection, bonuses and messages through
its API (Authorization: Token ...). The bonus pay step is not idempotent, so our database guards
it (mturk.services.reviewing.pay_bonus)."""

from decimal import Decimal

from django.conf import settings
from django.utils.dateparse import parse_datetime

from annotation.models import Worker
from mturk.exceptions import PlatformError
from mturk.platforms.base import (
    Backend,
    CallResult,
    LinkParameter,
    PlatformRecord,
    State,
    StudyLinkParameters,
)
from mturk.platforms.http import JsonApi

STATES = {
    "ACTIVE": State.IN_PROGRESS, "AWAITING REVIEW": State.SUBMITTED, "APPROVED": State.APPROVED,
    "REJECTED": State.REJECTED, "RETURNED": State.RETURNED, "TIMED-OUT": State.RETURNED,
}
LINK_PARAMETERS = StudyLinkParameters(
    participant=LinkParameter("PROLIFIC_PID", "{{%PROLIFIC_PID%}}"),
    study=LinkParameter("STUDY_ID", "{{%STUDY_ID%}}"),
    session=LinkParameter("SESSION_ID", "{{%SESSION_ID%}}"),
)
REJECTION_CATEGORIES = [
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
    "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
]
MIN_REJECTION_MESSAGE = 100


class ProlificApi(JsonApi):
    name = "Prolific"

    def __init__(self):
        if not settings.PROLIFIC_API_TOKEN:
            raise PlatformError(
                "Nothing was sent to Prolific: PROLIFIC_API_TOKEN is not set. Set it to sync, "
                "approve, reject, bonus and message participants through Prolific's API, or do "
                "that on Prolific's own site.", sent=False)
        super().__init__(settings.PROLIFIC_API_URL,
                         {"Authorization": f"Token {settings.PROLIFIC_API_TOKEN}"})


class ProlificBackend(Backend):
    platform = Worker.Platform.PROLIFIC
    label = "Prolific"
    credential_settings = ("PROLIFIC_API_TOKEN",)
    without_credentials = "review, approve and bonus on Prolific's own site"
    link_parameters = LINK_PARAMETERS
    completion_url_setting = "PROLIFIC_COMPLETE_URL"
    study_defaults = {**Backend.study_defaults, "auto_approval_days": 21}
    # Prolific's published academic rate: 33.3% of rewards and bonuses, plus VAT where it applies.
    assumed_fee_rate = Decimal("0.333")
    assumed_fee_reason = "its academic rate (plus VAT where it applies; higher for companies)"
    bonus_in_two_steps = True
    give_back_step = "return the study on Prolific, so that your place goes to someone else"

    def _study_id(self, study):
        if not study.external_id:
            raise PlatformError(f"Study “{study.name}” has no Prolific study id yet.")
        return study.external_id

    def confirms_participant(self, study, *, participant_id, session_id):
        # Prolific's SESSION_ID is the submission's id.
        item = ProlificApi().request("GET", f"submissions/{session_id}/")
        return (isinstance(item, dict) and item.get("participant_id") == participant_id
                and item.get("study_id") == study.external_id)

    def records(self, study, *, hits=None):
        api = ProlificApi()
        path, records = f"studies/{self._study_id(study)}/submissions/", []
        while path:
            body = api.request("GET", path)
            records.extend(self._record(item) for item in body.get("results", []))
            path = ((body.get("_links") or {}).get("next") or {}).get("href")
        return records

    def _record(self, item):
        completed = item.get("completed_at")
        return PlatformRecord(
            assignment_id=item["id"], worker_id=item.get("participant_id", ""),
            state=STATES.get(item.get("status"), State.IN_PROGRESS),
            platform_status=item.get("status", ""),
            submitted_at=parse_datetime(completed) if completed else None, raw=item,
        )

    def verify(self, submission):
        item = ProlificApi().request("GET", f"submissions/{submission.platform_assignment_id}/")
        record = self._record(item)
        if record.worker_id != submission.worker.external_id or (
                item.get("study_id") and item["study_id"] != submission.study.external_id):
            raise PlatformError(f"Prolific submission {record.assignment_id} is not this "
                                "participant's in this study; nothing was paid.")
        return record

    def verify_batch(self, submissions):
        # One listing of the study's submissions (a page per hundreds) instead of one request each.
        if len(submissions) < 2:
            return super().verify_batch(submissions)
        listed = {record.assignment_id: record for record in self.records(submissions[0].study)}
        found = {}
        for submission in submissions:
            record = listed.get(submission.platform_assignment_id)
            if record is None or record.worker_id != submission.worker.external_id:
                raise PlatformError(f"Prolific submission {submission.platform_assignment_id} is not "
                                    "this participant's in this study; nothing was paid.")
            found[submission.pk] = record
        return found

    def approve(self, submissions, *, feedback):
        if not submissions:
            return {}
        body = {"submission_ids": [s.platform_assignment_id for s in submissions]}
        # Approving twice is refused rather than paid twice, but do not resend on a 5xx blindly.
        response = ProlificApi().request("POST", "submissions/bulk-approve/", json=body, retry=False)
        result = CallResult(ok=True, request=body,
                            response=response if isinstance(response, dict) else {"body": response})
        return {s.pk: result for s in submissions}

    def reject(self, submissions, *, message, category=""):
        if len(message.strip()) < MIN_REJECTION_MESSAGE:
            raise PlatformError(
                f"Prolific needs a rejection message of at least {MIN_REJECTION_MESSAGE} characters "
                f"explaining why (this one has {len(message.strip())}).")
        if category not in REJECTION_CATEGORIES:
            raise PlatformError(f"Choose a Prolific rejection category: {', '.join(REJECTION_CATEGORIES)}.")
        api, results = ProlificApi(), {}
        for submission in submissions:
            body = {"action": "REJECT", "message": message, "rejection_category": category}
            response = api.request("POST", f"submissions/{submission.platform_assignment_id}/transition/",
                                   json=body, retry=False)
            results[submission.pk] = CallResult(ok=True, request=body, response=response)
        return results

    def set_up_bonus(self, bonus):
        """Step one: Prolific records the bonus and answers with its id (nothing is paid yet)."""
        submission = bonus.submission
        body = {"study_id": self._study_id(submission.study),
                "csv_bonuses": f"{submission.worker.external_id},{Decimal(bonus.amount_usd):.2f}"}
        response = ProlificApi().request("POST", "submissions/bonus-payments/", json=body, retry=False)
        return CallResult(ok=True, request=body, response=response)

    def pay_set_up_bonus(self, bonus):
        """Step two, not idempotent: the caller guarantees it is sent once."""
        path = f"bulk-bonus-payments/{bonus.platform_reference}/pay/"
        response = ProlificApi().request("POST", path, json={}, retry=False)
        return CallResult(ok=True, request={"path": path},
                          response=response if isinstance(response, dict) else {"body": response})

    def notify(self, study, workers, *, subject, message):
        api, results = ProlificApi(), []
        for worker in workers:
            body = {"recipient_id": worker.external_id, "study_id": self._study_id(study),
                    "body": f"{subject}\n\n{message}"}
            results.append(CallResult(ok=True, request=body,
                                      response=api.request("POST", "messages/", json=body, retry=False)))
        return results
