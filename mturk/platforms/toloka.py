"""Toloka: Tolokers arrive by a study link that the project's task interface opens, and type the
completion code back into their task; sync, approval, rejection, bonuses, blocks and messages go
through Toloka's own client (toloka-kit's TolokaClient, OAuth or ApiKey token).

A crowdbench study is one Toloka pool (its id is the study's external id); a Toloker's attempt is
a Toloka assignment, whose id is the session our assignments and submissions are matched on.
"""

import json
import uuid
from datetime import UTC
from decimal import Decimal
from types import GeneratorType

import httpx
from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from annotation.models import Worker
from mturk import calls
from mturk.exceptions import PlatformError, PlatformRequestError
from mturk.platforms.base import (
    Backend,
    CallResult,
    LinkParameter,
    PlatformRecord,
    State,
    StudyLinkParameters,
)

NAME = "Toloka"
STATES = {
    "ACTIVE": State.IN_PROGRESS, "SUBMITTED": State.SUBMITTED, "ACCEPTED": State.APPROVED,
    "REJECTED": State.REJECTED, "SKIPPED": State.RETURNED, "EXPIRED": State.RETURNED,
}
# Toloka fills nothing into a link by itself: the project's task interface (its HTML/JS editor)
# opens this link with the Toloker's id, the pool's id and the assignment's id in place of these.
LINK_PARAMETERS = StudyLinkParameters(
    participant=LinkParameter("tolokaUserId", "{TOLOKA_USER_ID}"),
    study=LinkParameter("tolokaPoolId", "{TOLOKA_POOL_ID}"),
    session=LinkParameter("tolokaAssignmentId", "{TOLOKA_ASSIGNMENT_ID}"),
)
#: The language the words Toloka shows a Toloker (bonus titles, messages) are keyed by.
LANGUAGE = "EN"
# Bonuses: one operation id per bonus row, so a retried or repeated request is one payment
# (Toloka performs an operation id once).
_BONUS_NAMESPACE = uuid.UUID("3b0a4d52-6f0e-4f4e-9d7e-6a1c2b8e5f10")


class TolokaApi:
    """toloka-kit's TolokaClient, each call reported to mturk.calls and its errors turned into
    ours: a 4xx is a PlatformRequestError (Toloka refused), anything else a PlatformError."""

    def __init__(self):
        if not settings.TOLOKA_API_TOKEN:
            raise PlatformError(
                "Nothing was sent to Toloka: TOLOKA_API_TOKEN is not set. Set it to sync, approve, "
                "reject, bonus, block and message Tolokers through Toloka's API, or do that on "
                "Toloka's own site.", sent=False)
        from toloka.client import TolokaClient

        # toloka-kit retries 429 and 5xx itself (every method: its writes carry ids or are
        # status changes a repeat cannot double).
        self.client = TolokaClient(settings.TOLOKA_API_TOKEN, url=settings.TOLOKA_API_URL,
                                   retries=max(0, settings.PLATFORM_HTTP_MAX_ATTEMPTS - 1),
                                   timeout=settings.PLATFORM_HTTP_TIMEOUT_SECONDS)

    def call(self, method, *args, request, **kwargs):
        from toloka.client import unstructure
        from toloka.client.exceptions import ApiError

        try:
            answer = getattr(self.client, method)(*args, **kwargs)
            if isinstance(answer, GeneratorType):
                answer = list(answer)
            # Toloka's amounts arrive as Decimals; what is kept is plain JSON.
            body = json.loads(json.dumps(unstructure(answer), default=str))
        except ApiError as error:
            detail = f"{error.code}: {error.message}" if error.code else str(error.message or error)
            response = {"code": error.code, "message": error.message, "payload": error.payload}
            if error.status_code is not None and error.status_code < 500:
                failure = PlatformRequestError(f"Toloka refused {method} (HTTP {error.status_code}): {detail}",
                                               code=error.code or str(error.status_code), response=response)
            else:
                failure = PlatformError(f"Toloka failed {method} (HTTP {error.status_code}): {detail}")
            calls.report(platform=NAME, operation=method, request=request, error=str(failure), response=response)
            raise failure from error
        except httpx.HTTPError as error:
            failure = PlatformError(f"Toloka could not be reached: {error}")
            calls.report(platform=NAME, operation=method, request=request, error=str(failure))
            raise failure from error
        calls.report(platform=NAME, operation=method, request=request,
                     response=body if isinstance(body, dict) else {"items": body})
        return body


class TolokaBackend(Backend):
    platform = Worker.Platform.TOLOKA
    label = NAME
    credential_settings = ("TOLOKA_API_TOKEN",)
    without_credentials = "review, approve, bonus and block on Toloka's own site"
    link_parameters = LINK_PARAMETERS
    # Toloka shows no completion page of its own: the Toloker types the code into the task.
    completion_url_setting = ""
    # Toloka publishes no commission rate; the account's is in its contract with Toloka.
    assumed_fee_rate = Decimal("0")
    assumed_fee_reason = "Toloka publishes no commission rate; it is in your account's contract"
    give_back_step = "skip the task on Toloka, so that it goes to someone else"

    def _pool(self, study):
        if not study.external_id:
            raise PlatformError(f"Study “{study.name}” has no Toloka pool id yet.")
        return study.external_id

    def confirms_participant(self, study, *, participant_id, session_id):
        item = TolokaApi().call("get_assignment", session_id, request={"assignment_id": session_id})
        return item.get("user_id") == participant_id and item.get("pool_id") == study.external_id

    def records(self, study, *, hits=None):
        pool = self._pool(study)
        items = TolokaApi().call("get_assignments", pool_id=pool, request={"pool_id": pool})
        return [self._record(item) for item in items]

    def _record(self, item):
        submitted = parse_datetime(item.get("submitted") or "")
        if submitted is not None and timezone.is_naive(submitted):
            # Toloka writes its times in UTC without saying so.
            submitted = timezone.make_aware(submitted, UTC)
        return PlatformRecord(
            assignment_id=item["id"], worker_id=item.get("user_id", ""),
            state=STATES.get(item.get("status"), State.IN_PROGRESS), platform_status=item.get("status", ""),
            submitted_at=submitted, raw=item,
        )

    def verify(self, submission):
        assignment_id = submission.platform_assignment_id
        record = self._record(TolokaApi().call("get_assignment", assignment_id,
                                               request={"assignment_id": assignment_id}))
        return self._confirm(submission, record)

    def verify_batch(self, submissions):
        # One listing of the pool instead of one request per assignment.
        if len(submissions) < 2:
            return super().verify_batch(submissions)
        listed = {record.assignment_id: record for record in self.records(submissions[0].study)}
        return {s.pk: self._confirm(s, listed.get(s.platform_assignment_id)) for s in submissions}

    def _confirm(self, submission, record):
        if (record is None or record.worker_id != submission.worker.external_id
                or record.raw.get("pool_id") != submission.study.external_id):
            raise PlatformError(f"Toloka assignment {submission.platform_assignment_id} is not this "
                                "Toloker's in this pool; nothing was paid.")
        return record

    def _review(self, submissions, method, comment, done_status):
        api, results = TolokaApi(), {}
        for submission in submissions:
            request = {"assignment_id": submission.platform_assignment_id, "public_comment": comment}
            try:
                response = api.call(method, submission.platform_assignment_id, comment, request=request)
                results[submission.pk] = CallResult(ok=True, request=request, response=response)
            except PlatformRequestError as error:
                # A retry of a change that went through is refused; the assignment says what happened.
                if self.verify(submission).platform_status == done_status:
                    results[submission.pk] = CallResult(
                        ok=True, request=request, response={"note": f"already {done_status} on Toloka"})
                else:
                    results[submission.pk] = CallResult(ok=False, request=request, response=error.response,
                                                        error=str(error))
        return results

    def approve(self, submissions, *, feedback):
        # Toloka shows the Toloker a comment with every decision.
        return self._review(submissions, "accept_assignment", feedback or "Accepted. Thank you.", "ACCEPTED")

    def reject(self, submissions, *, message, category=""):
        if not message.strip():
            raise PlatformError("Toloka needs a comment saying why work is rejected.")
        return self._review(submissions, "reject_assignment", message, "REJECTED")

    def pay_bonus(self, bonus):
        from toloka.client import UserBonus
        from toloka.client.user_bonus import UserBonusCreateRequestParameters

        submission = bonus.submission
        operation = uuid.uuid5(_BONUS_NAMESPACE, bonus.request_token)
        request = {"user_id": submission.worker.external_id, "amount": f"{bonus.amount_usd:.2f}",
                   "assignment_id": submission.platform_assignment_id, "public_message": bonus.reason,
                   "operation_id": str(operation)}
        paid = UserBonus(user_id=submission.worker.external_id, amount=Decimal(bonus.amount_usd),
                         assignment_id=submission.platform_assignment_id, without_message=False,
                         public_title={LANGUAGE: "Bonus"}, public_message={LANGUAGE: bonus.reason})
        try:
            response = TolokaApi().call(
                "create_user_bonus", paid, UserBonusCreateRequestParameters(operation_id=operation),
                request=request)
        except PlatformRequestError as error:
            return CallResult(ok=False, request=request, response=error.response, error=str(error))
        return CallResult(ok=True, request=request, response=response)

    def block(self, worker, *, reason):
        from toloka.client.user_restriction import AllProjectsUserRestriction

        request = {"user_id": worker.external_id, "scope": "ALL_PROJECTS", "private_comment": reason}
        try:
            response = TolokaApi().call(
                "set_user_restriction",
                AllProjectsUserRestriction(user_id=worker.external_id, private_comment=reason), request=request)
        except PlatformRequestError as error:
            return CallResult(ok=False, request=request, response=error.response, error=str(error))
        return CallResult(ok=True, request=request, response=response)

    def notify(self, study, workers, *, subject, message):
        from toloka.client.message_thread import MessageThreadCompose

        ids = [worker.external_id for worker in workers]
        request = {"recipients_ids": ids, "topic": subject}
        response = TolokaApi().call(
            "compose_message_thread",
            MessageThreadCompose(recipients_select_type="DIRECT", recipients_ids=ids, topic={LANGUAGE: subject},
                                 text={LANGUAGE: message}, answerable=True), request=request)
        return [CallResult(ok=True, request={**request, "WorkerIds": ids}, response=response)]
