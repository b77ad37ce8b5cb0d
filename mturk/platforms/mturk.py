"""Amazon Mechanical Turk: a HIT type per study, one ExternalQuestion HIT per work unit."""

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from xml.sax.saxutils import escape

from django.urls import NoReverseMatch, reverse

from annotation.models import StageQualification, Worker
from annotation.public_urls import public_url
from mturk import client as mturk_client
from mturk.exceptions import PlatformError, PlatformRequestError
from mturk.models import short_hash
from mturk.money import cents
from mturk.platforms.base import Backend, CallResult, PlatformRecord, State

EXTERNAL_QUESTION_SCHEMA = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd"
)
LOCALE_QUALIFICATION = "00000000000000000071"
APPROVAL_RATE_QUALIFICATION = "000000000000000000L0"
NUMBER_APPROVED_QUALIFICATION = "00000000000000000040"
NOTIFY_BATCH = 100
STATES = {"Submitted": State.SUBMITTED, "Approved": State.APPROVED, "Rejected": State.REJECTED}
# A HIT with fewer than 10 assignments can never be extended to 10 or more (MTurk's fee rule).
LARGE_HIT = 10
MTURK_FEE = Decimal("0.20")
MTURK_LARGE_HIT_FEE = Decimal("0.20")
MTURK_MIN_FEE = Decimal("0.01")


@dataclass(frozen=True)
class PerAssignmentFee:
    """MTurk bills each assignment on its own (requester.mturk.com/pricing): 20% of the reward,
    20% more when the HIT has 10 or more assignments, at least $0.01 per assignment or bonus
    payment, each fee rounded half up to the cent ("$0.104 is rounded to $0.10, $0.105 to $0.11",
    the page's answer on rounding). A batch's fee is therefore one assignment's fee times its
    assignments, and a penny lost or gained in rounding is lost or gained on every one."""

    per_assignment = True
    note = "MTurk's published rate, the same for every requester"

    def fee_per_assignment(self, *, reward, assignments_per_task):
        rate = MTURK_FEE + (MTURK_LARGE_HIT_FEE if assignments_per_task >= LARGE_HIT else Decimal("0"))
        return max(MTURK_MIN_FEE, cents(Decimal(reward) * rate))

    def fees(self, *, reward, assignments_per_task, tasks):
        return self.fee_per_assignment(reward=reward, assignments_per_task=assignments_per_task) * (
            assignments_per_task * tasks)

    def bonus_fee(self, amount):
        return max(MTURK_MIN_FEE, cents(Decimal(amount) * MTURK_FEE))

    def rule(self, assignments_per_task):
        if assignments_per_task >= LARGE_HIT:
            share = "40% of each assignment's reward (20%, and 20% more for HITs of 10+ assignments)"
        else:
            share = "20% of each assignment's reward"
        return f"MTurk: {share}, rounded half up per assignment, min $0.01"


def unit_url(unit, study):
    try:
        path = reverse("frontend:unit", args=[unit.pk])
    except NoReverseMatch:
        path = f"/work/unit/{unit.pk}/"
    return public_url(f"{path}?study={study.pk}")


def external_question(url, frame_height):
    if not url.startswith("https://"):
        raise PlatformError(
            f"MTurk shows only HTTPS pages; {url} is not one. Set PUBLIC_BASE_URL to the site's "
            "https:// address.")
    return (
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_SCHEMA}">'
        f"<ExternalURL>{escape(url)}</ExternalURL>"
        f"<FrameHeight>{int(frame_height)}</FrameHeight>"
        "</ExternalQuestion>"
    )


def qualification_requirements(study):
    requirements = []
    countries = [c.strip().upper() for c in study.worker_countries.split(",") if c.strip()]
    if countries:
        requirements.append({
            "QualificationTypeId": LOCALE_QUALIFICATION, "Comparator": "In",
            "LocaleValues": [{"Country": country} for country in countries],
            "ActionsGuarded": "DiscoverPreviewAndAccept",
        })
    if study.min_approval_rate:
        requirements.append({
            "QualificationTypeId": APPROVAL_RATE_QUALIFICATION, "Comparator": "GreaterThanOrEqualTo",
            "IntegerValues": [int(study.min_approval_rate)], "ActionsGuarded": "DiscoverPreviewAndAccept",
        })
    if study.min_approved_hits:
        requirements.append({
            "QualificationTypeId": NUMBER_APPROVED_QUALIFICATION,
            "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [int(study.min_approved_hits)],
            "ActionsGuarded": "DiscoverPreviewAndAccept",
        })
    if study.requires_stage_qualification:
        qualification = StageQualification.objects.filter(stage=study.stage).first()
        if qualification is None:
            raise PlatformError(
                f"The study requires the {study.get_stage_display()} qualification, but that stage "
                "has no qualification test yet. Add one, or untick 'requires stage qualification'.")
        requirements.append({
            "QualificationTypeId": ensure_mturk_qualification_type(qualification),
            "Comparator": "Exists", "ActionsGuarded": "DiscoverPreviewAndAccept",
        })
    return requirements


def ensure_mturk_qualification_type(qualification):
    """The stage's MTurk qualification type in the current environment, made on first use."""
    environment = mturk_client.environment()
    if qualification.mturk_qualification_type_id and qualification.mturk_environment == environment:
        return qualification.mturk_qualification_type_id
    response = mturk_client.call(
        "create_qualification_type",
        Name=f"{qualification.name} (crowdbench {qualification.stage})",
        Keywords="crowdbench, qualification",
        Description=qualification.description[:2000] or qualification.name,
        QualificationTypeStatus="Active",
        AutoGranted=False,
    )
    qualification.mturk_qualification_type_id = response["QualificationType"]["QualificationTypeId"]
    qualification.mturk_environment = environment
    qualification.save(update_fields=["mturk_qualification_type_id", "mturk_environment"])
    return qualification.mturk_qualification_type_id


def _hit_id_from_duplicate(error):
    # "The HIT with ID 3XYZ... already exists" when a UniqueRequestToken is reused (24 h).
    match = re.search(r"\b([A-Z0-9]{20,})\b", str(error))
    return match.group(1) if match else ""


class MTurkBackend(Backend):
    platform = Worker.Platform.MTURK
    label = "MTurk"
    credential_settings = mturk_client.CREDENTIAL_SETTINGS
    without_credentials = "nothing can be published or paid on MTurk"
    publishes_per_unit = True
    study_defaults = {"worker_countries": "US", "min_approval_rate": 98, "min_approved_hits": 1000,
                      "auto_approval_days": 3}
    study_fields = ("title", "description", "keywords", "assignment_duration_minutes", "lifetime_hours",
                    "frame_height", "requires_stage_qualification", "worker_countries", "min_approval_rate",
                    "min_approved_hits", "hit_type_id", "hit_type_environment")
    per_assignment_fee = PerAssignmentFee()
    grants_qualifications = True
    give_back_step = "press “Return” on MTurk, so that the HIT goes to someone else"

    def missing_credentials(self):
        # boto3 also finds keys in its own chain (AWS_* variables, ~/.aws, an instance role).
        return [] if mturk_client.credentials_found() else list(self.credential_settings)

    # --- identity and qualifications -----------------------------------------------------------

    def confirm_assignment(self, *, assignment_id, worker_id, listing_id):
        # MTurk answers GetAssignment only for assignments it holds as Submitted, Approved or
        # Rejected, so an assignment still being worked on cannot be confirmed.
        record = mturk_client.call("get_assignment", AssignmentId=assignment_id).get("Assignment") or {}
        if record.get("WorkerId") != worker_id or record.get("HITId") != listing_id:
            return None
        return record

    def grant_qualification(self, granted):
        mturk_client.call(
            "associate_qualification_with_worker",
            QualificationTypeId=ensure_mturk_qualification_type(granted.qualification),
            WorkerId=granted.worker.external_id, IntegerValue=int(granted.test_score * 100),
            SendNotification=True)

    # --- publishing ----------------------------------------------------------------------------

    def hit_type_params(self, study, reward):
        params = {
            "AutoApprovalDelayInSeconds": study.auto_approval_days * 24 * 3600,
            "AssignmentDurationInSeconds": study.assignment_duration_minutes * 60,
            "Reward": f"{reward:.2f}",
            "Title": study.hit_title,
            "Keywords": study.keywords,
            "Description": study.description or study.hit_title,
            "QualificationRequirements": qualification_requirements(study),
        }
        return params

    def ensure_hit_type(self, study, reward):
        """The study's HIT type for these properties, made when they (or the environment) change."""
        params = self.hit_type_params(study, reward)
        environment = mturk_client.environment()
        signature = short_hash(environment, sorted(params.items(), key=lambda kv: kv[0]))
        if study.hit_type_id and study.hit_type_signature == signature:
            return study.hit_type_id, params
        response = mturk_client.call("create_hit_type", **params)
        study.hit_type_id = response["HITTypeId"]
        study.hit_type_environment = environment
        study.hit_type_signature = signature
        study.save(update_fields=["hit_type_id", "hit_type_environment", "hit_type_signature"])
        return study.hit_type_id, params

    def create_hit(self, hit, study):
        params = {
            "HITTypeId": hit.hit_type_id,
            "MaxAssignments": hit.max_assignments,
            "LifetimeInSeconds": study.lifetime_hours * 3600,
            "Question": external_question(unit_url(hit.unit, study), study.frame_height),
            "RequesterAnnotation": f"crowdbench unit {hit.unit_id}",
            "UniqueRequestToken": hit.request_token,
        }
        try:
            response = mturk_client.call("create_hit_with_hit_type", **params)
        except PlatformRequestError as error:
            existing = _hit_id_from_duplicate(error) if "already exists" in str(error) else ""
            if not existing:
                raise
            # Our earlier call went through but its answer was lost: that HIT is this one.
            return CallResult(ok=True, request=params, response={"HIT": {"HITId": existing}})
        return CallResult(ok=True, request=params, response=response)

    # --- sync ----------------------------------------------------------------------------------

    def records(self, study, *, hits=None):
        records = []
        for hit in hits if hits is not None else study.hits.exclude(hit_id=""):
            params = {"HITId": hit.hit_id, "MaxResults": 100,
                      "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]}
            while True:
                response = mturk_client.call("list_assignments_for_hit", **params)
                for item in response.get("Assignments", []):
                    records.append(self._record(item))
                token = response.get("NextToken")
                if not token:
                    break
                params["NextToken"] = token
        return records

    def _record(self, item):
        raw = {k: v for k, v in item.items() if k != "Answer"}
        return PlatformRecord(
            assignment_id=item["AssignmentId"], worker_id=item["WorkerId"],
            state=STATES.get(item.get("AssignmentStatus"), State.IN_PROGRESS),
            platform_status=item.get("AssignmentStatus", ""), submitted_at=item.get("SubmitTime"),
            hit_id=item.get("HITId", ""), raw=_jsonable(raw),
        )

    def verify(self, submission):
        response = mturk_client.call("get_assignment", AssignmentId=submission.platform_assignment_id)
        record = self._record(response["Assignment"])
        if record.worker_id != submission.worker.external_id:
            raise PlatformError(
                f"Assignment {submission.platform_assignment_id} belongs to another worker on "
                "MTurk; nothing was paid.")
        if submission.hit and record.hit_id != submission.hit.hit_id:
            raise PlatformError(
                f"Assignment {submission.platform_assignment_id} is not of our HIT "
                f"{submission.hit.hit_id}; nothing was paid.")
        return record

    # --- review and pay ------------------------------------------------------------------------

    def approve(self, submissions, *, feedback):
        results = {}
        for submission in submissions:
            params = {"AssignmentId": submission.platform_assignment_id}
            if feedback:
                params["RequesterFeedback"] = feedback
            results[submission.pk] = self._review_call("approve_assignment", params, submission,
                                                        done_status="Approved")
        return results

    def reject(self, submissions, *, message, category=""):
        results = {}
        for submission in submissions:
            params = {"AssignmentId": submission.platform_assignment_id, "RequesterFeedback": message}
            results[submission.pk] = self._review_call("reject_assignment", params, submission,
                                                        done_status="Rejected")
        return results

    def _review_call(self, operation, params, submission, *, done_status):
        try:
            return CallResult(ok=True, request=params, response=mturk_client.call(operation, **params))
        except PlatformRequestError as error:
            # A retry of a call that went through is refused; the assignment says what happened.
            record = self.verify(submission)
            if record.platform_status == done_status:
                return CallResult(ok=True, request=params,
                                  response={"note": f"already {done_status} on MTurk"})
            return CallResult(ok=False, request=params, response=error.response, error=str(error))

    def pay_bonus(self, bonus):
        submission = bonus.submission
        params = {
            "WorkerId": submission.worker.external_id,
            "BonusAmount": f"{bonus.amount_usd:.2f}",
            "AssignmentId": submission.platform_assignment_id,
            "Reason": bonus.reason,
            "UniqueRequestToken": bonus.request_token,
        }
        try:
            response = mturk_client.call("send_bonus", **params)
        except PlatformRequestError as error:
            return CallResult(ok=False, request=params, response=error.response, error=str(error))
        return CallResult(ok=True, request=params, response=response)

    def block(self, worker, *, reason):
        params = {"WorkerId": worker.external_id, "Reason": reason}
        try:
            response = mturk_client.call("create_worker_block", **params)
        except PlatformRequestError as error:
            return CallResult(ok=False, request=params, response=error.response, error=str(error))
        return CallResult(ok=True, request=params, response=response)

    def notify(self, study, workers, *, subject, message):
        ids = [worker.external_id for worker in workers]
        results = []
        for start in range(0, len(ids), NOTIFY_BATCH):
            params = {"Subject": subject, "MessageText": message,
                      "WorkerIds": ids[start:start + NOTIFY_BATCH]}
            response = mturk_client.call("notify_workers", **params)
            failures = response.get("NotifyWorkersFailureStatuses", [])
            results.append(CallResult(ok=not failures, request=params, response=response,
                                      error="; ".join(f.get("NotifyWorkersFailureMessage", "")
                                                      for f in failures)))
        return results

    def expire(self, study, hits):
        results = []
        for hit in hits:
            params = {"HITId": hit.hit_id, "ExpireAt": datetime(2015, 1, 1, tzinfo=UTC)}
            response = mturk_client.call("update_expiration_for_hit", **params)
            results.append((hit, CallResult(ok=True, request=_jsonable(params), response=response)))
        return results

    def extend(self, hit, *, more):
        total = hit.max_assignments + more
        if hit.max_assignments < LARGE_HIT <= total:
            raise PlatformError(
                f"HIT {hit.hit_id} was made with {hit.max_assignments} assignments; MTurk cannot "
                f"extend a HIT of fewer than {LARGE_HIT} to {LARGE_HIT} or more. Publish a new HIT.")
        params = {"HITId": hit.hit_id, "NumberOfAdditionalAssignments": more,
                  # One token per target size: a retry never adds the assignments twice.
                  "UniqueRequestToken": f"crowdbench-extend-{hit.pk}-{total}"}
        response = mturk_client.call("create_additional_assignments_for_hit", **params)
        return CallResult(ok=True, request=params, response=response)


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value
