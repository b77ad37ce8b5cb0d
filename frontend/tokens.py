"""Signed tokens that bind a stage page to one assignment of one worker.

A platform worker id in a URL is only a claim (DESIGN: "MTurk's worker side"), and inside MTurk's
iframe Safari may drop every cookie, so neither the URL nor the session can say who is submitting.
Instead the page is given, when it is first served, a token signed with our secret key that names
our assignment and worker; the submit endpoint trusts that token and nothing else.
"""

from dataclasses import dataclass

from django.conf import settings
from django.core import signing

from annotation.exceptions import AnnotationError

_ASSIGNMENT_SALT = "crowdbench.frontend.assignment"
_SESSION_SALT = "crowdbench.frontend.study-session"
_WORKER_SALT = "crowdbench.frontend.worker-page"
_GOLD_SALT = "crowdbench.frontend.live-gold"
_QUALIFICATION_SALT = "crowdbench.frontend.qualification"


class TokenRefused(AnnotationError):
    """A token that is forged, altered, or too old; the message is for the worker."""


@dataclass(frozen=True)
class AssignmentGrant:
    """What a stage page may submit: one assignment, for one worker.

    `turk_submit_to` is where MTurk wants the assignment handed back and `mturk_assignment_id` the
    MTurk assignment the page was opened for (a token of an earlier binding of the same unit is no
    good once MTurk confirmed a new one); `study_id` and `platform_session_id` say which
    CloudResearch / Prolific study the participant works in.
    """

    assignment_id: int
    worker_id: int
    turk_submit_to: str = ""
    study_id: int | None = None
    platform_session_id: str = ""
    mturk_assignment_id: str = ""

    @property
    def session(self):
        if self.study_id is None:
            return None
        return StudySession(worker_id=self.worker_id, study_id=self.study_id,
                            platform_session_id=self.platform_session_id)


@dataclass(frozen=True)
class StudySession:
    """A CloudResearch / Prolific participant working through a study, possibly unit after unit."""

    worker_id: int
    study_id: int
    platform_session_id: str = ""


def sign_assignment(grant):
    return signing.dumps(
        {"a": grant.assignment_id, "w": grant.worker_id, "t": grant.turk_submit_to,
         "s": grant.study_id, "p": grant.platform_session_id, "m": grant.mturk_assignment_id},
        salt=_ASSIGNMENT_SALT, compress=True,
    )


def read_assignment(token):
    data = _load(token, _ASSIGNMENT_SALT)
    try:
        return AssignmentGrant(assignment_id=int(data["a"]), worker_id=int(data["w"]),
                               turk_submit_to=str(data.get("t") or ""),
                               study_id=int(data["s"]) if data.get("s") is not None else None,
                               platform_session_id=str(data.get("p") or ""),
                               mturk_assignment_id=str(data.get("m") or ""))
    except (KeyError, TypeError, ValueError):
        raise TokenRefused(FORGED_MESSAGE) from None


def sign_session(session):
    return signing.dumps(
        {"w": session.worker_id, "s": session.study_id, "p": session.platform_session_id},
        salt=_SESSION_SALT, compress=True,
    )


def read_session(token):
    data = _load(token, _SESSION_SALT)
    try:
        return StudySession(worker_id=int(data["w"]), study_id=int(data["s"]),
                            platform_session_id=str(data.get("p", "")))
    except (KeyError, TypeError, ValueError):
        raise TokenRefused(FORGED_MESSAGE) from None


def sign_worker(worker_id, *, assignment_id=None):
    """A link to a worker's own page, for platform workers who have no account with us.

    An MTurk worker's link names the assignment whose page gave it: the page shows their whole
    record only once MTurk confirms that assignment is theirs (frontend.worker_views.worker_page).
    """
    data = {"w": worker_id}
    if assignment_id is not None:
        data["a"] = assignment_id
    return signing.dumps(data, salt=_WORKER_SALT)


def read_worker(token):
    """(worker id, assignment id or None) of a worker-page link."""
    data = _load(token, _WORKER_SALT)
    try:
        return int(data["w"]), int(data["a"]) if data.get("a") is not None else None
    except (KeyError, TypeError, ValueError):
        raise TokenRefused(FORGED_MESSAGE) from None


@dataclass(frozen=True)
class GoldGrant:
    """A gold item shown as a normal task of its stage (annotation.workforce.qualifications: live gold items).

    `next_url` is where the worker goes once it is answered: the same stage or unit page again.
    """

    item_id: int
    worker_id: int
    stage: str
    next_url: str


def sign_gold(grant):
    return signing.dumps({"g": grant.item_id, "w": grant.worker_id, "s": grant.stage,
                          "n": grant.next_url}, salt=_GOLD_SALT, compress=True)


def read_gold(token):
    data = _load(token, _GOLD_SALT)
    try:
        return GoldGrant(item_id=int(data["g"]), worker_id=int(data["w"]), stage=str(data["s"]),
                         next_url=_local_path(data.get("n")))
    except (KeyError, TypeError, ValueError):
        raise TokenRefused(FORGED_MESSAGE) from None


def read_form_grant(token):
    """What a task form's token grants: an AssignmentGrant, or a GoldGrant for a live gold item."""
    try:
        return read_assignment(token)
    except TokenRefused as refused:
        try:
            return read_gold(token)
        except TokenRefused:
            raise refused from None


@dataclass(frozen=True)
class QualificationPass:
    """Who takes a stage's qualification test, and where the tasks are once they pass."""

    worker_id: int
    stage: str
    next_url: str = ""


def sign_qualification(grant):
    return signing.dumps({"w": grant.worker_id, "s": grant.stage, "n": grant.next_url},
                         salt=_QUALIFICATION_SALT, compress=True)


def read_qualification(token):
    data = _load(token, _QUALIFICATION_SALT)
    try:
        return QualificationPass(worker_id=int(data["w"]), stage=str(data["s"]),
                                 next_url=_local_path(data.get("n")))
    except (KeyError, TypeError, ValueError):
        raise TokenRefused(FORGED_MESSAGE) from None


def _local_path(value):
    # Signed by us, but a path on this site is all a "next" may ever be (no open redirect).
    value = str(value or "")
    return value if value.startswith("/") and not value.startswith("//") else ""


FORGED_MESSAGE = "This page's task key is not valid. Please open the task again from your platform."


def _load(token, salt):
    if not token:
        raise TokenRefused(FORGED_MESSAGE)
    try:
        data = signing.loads(token, salt=salt, max_age=settings.ANNOTATOR_TOKEN_MAX_AGE_SECONDS)
    except signing.SignatureExpired:
        raise TokenRefused(
            "This page has been open too long. Reload it to continue: your text is kept in this "
            "browser."
        ) from None
    except signing.BadSignature:
        raise TokenRefused(FORGED_MESSAGE) from None
    if not isinstance(data, dict):
        raise TokenRefused(FORGED_MESSAGE)
    return data
