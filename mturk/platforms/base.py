"""What every platform does for us. Services (mturk/services/) hold the rules and the records;
a backend only speaks its platform's API."""

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from mturk.exceptions import PlatformError


class State:
    """A platform's status of a worker's work, in our words."""

    IN_PROGRESS = "in_progress"
    SUBMITTED = "submitted"
    APPROVED = "approved"
    REJECTED = "rejected"
    RETURNED = "returned"


@dataclass
class PlatformRecord:
    """One worker's work as the platform lists it."""

    assignment_id: str
    worker_id: str
    state: str
    platform_status: str
    submitted_at: datetime | None = None
    hit_id: str = ""
    raw: dict = field(default_factory=dict)


@dataclass(frozen=True)
class LinkParameter:
    """One id in a study link: its name in the query and the placeholder the platform fills in."""

    name: str
    placeholder: str


@dataclass(frozen=True)
class StudyLinkParameters:
    """How a study platform names its ids in the link it sends participants along.

    ``session`` is one participant's attempt at the study (Connect's assignment, Prolific's
    session); our assignments and the platform's submissions are matched on it.
    """

    participant: LinkParameter
    study: LinkParameter
    session: LinkParameter
    #: The order the platform's own documentation writes them in, kept in the links we print.
    order: tuple = ("participant", "study", "session")

    def query(self):
        return "&".join(f"{p.name}={p.placeholder}" for p in (getattr(self, role) for role in self.order))

    def read(self, params):
        """(participant id, study id, session id) from a request's query, or None when the
        query carries none of this platform's ids."""
        if not (params.get(self.participant.name) or params.get(self.study.name)):
            return None
        return (params.get(self.participant.name, ""), params.get(self.study.name, ""),
                params.get(self.session.name, ""))


@dataclass
class CallResult:
    ok: bool
    request: dict
    response: dict
    error: str = ""


class Backend:
    platform = ""
    #: The platform's name as researchers know it.
    label = ""
    #: The settings its API needs before anything can be sent to it; none: it has no API we call.
    credential_settings = ()
    #: How a researcher reviews and pays while those settings are unset.
    without_credentials = ""
    #: Whether work is published as one platform task per unit (MTurk HITs) or as places in a
    #: study whose participants draw units from our queue.
    publishes_per_unit = False
    #: StudyLinkParameters for platforms whose participants arrive by a study link, else None.
    link_parameters = None
    #: The setting holding the URL a participant is sent back to with the completion code.
    completion_url_setting = ""
    #: What a new study on the platform starts with (CrowdStudy fields). Worker requirements are
    #: MTurk's own qualification requirements of a HIT type; the study platforms screen
    #: participants on their own sites, so there they start empty. Auto-approval is each
    #: platform's own rule.
    study_defaults = {"worker_countries": "", "min_approval_rate": 0, "min_approved_hits": 0,
                      "auto_approval_days": 0}
    #: The CrowdStudy fields of the platform's own settings that this backend sends or reads (a
    #: HIT's title, keywords and qualification requirements); a study's form shows a platform's
    #: own and no other platform's.
    study_fields = ()
    #: The share of rewards and bonuses the platform publishes for academic accounts, assumed
    #: until PLATFORM_FEE_RATES_JSON sets the account's, and why it is the one assumed; None: the
    #: platform bills no share, or bills its own way (`per_assignment_fee`).
    assumed_fee_rate = None
    assumed_fee_reason = ""
    #: A platform billing each assignment on its own rules (mturk.pay.PerAssignmentFee's shape);
    #: None: the platform bills a share of a batch (mturk.pay.BatchFee).
    per_assignment_fee = None
    #: Whether a bonus is paid in two calls, `set_up_bonus` then `pay_set_up_bonus`, the second not
    #: idempotent, so our database guards it (mturk.services.reviewing.pay_bonus); else `pay_bonus`.
    bonus_in_two_steps = False
    #: Whether a worker who passed our qualification test is granted a qualification on the
    #: platform too (mturk.services.qualifying), so the platform lets them take its tasks.
    grants_qualifications = False
    #: What a worker who failed the qualification test is asked to do on the platform to give
    #: their place back to someone who can do the work; "" where there is no place to give back.
    give_back_step = ""

    def missing_credentials(self):
        """The settings still to set before a request can be sent to the platform."""
        return [name for name in self.credential_settings if not getattr(settings, name, "")]

    def confirms_participant(self, study, *, participant_id, session_id):
        """Whether the platform's own record says this session of the study is this participant's
        (mturk.identity.confirm_participant); raises PlatformError when it cannot be asked."""
        return False

    def confirm_assignment(self, *, assignment_id, worker_id, listing_id):
        """The platform's record of a per-unit assignment (an MTurk HIT's) when it is `worker_id`'s
        on `listing_id`, else None; raises PlatformError when it cannot be asked."""
        return None

    def grant_qualification(self, granted):
        """Grant a worker who passed our test (`granted`, a WorkerQualification) the platform's
        qualification; only called where `grants_qualifications`."""
        raise NotImplementedError

    def payments_csv(self, study):
        """The study's approvals and bonuses as a file for the platform's own dashboard, where it
        takes one; None where it does not."""
        return None

    def records(self, study, *, hits=None):
        """Every PlatformRecord of the study (or of these HITs)."""
        raise NotImplementedError

    def verify(self, submission):
        """The platform's record of this submission, fetched now; raises if it is not ours."""
        raise NotImplementedError

    def verify_batch(self, submissions):
        """{submission.pk: its record}, for submissions of one study reviewed together; raises if
        one is not ours. Platforms that list a study's work in one call ask once per batch."""
        return {submission.pk: self.verify(submission) for submission in submissions}

    def approve(self, submissions, *, feedback):
        """{submission.pk: CallResult}."""
        raise NotImplementedError

    def reject(self, submissions, *, message, category=""):
        raise NotImplementedError

    def pay_bonus(self, bonus):
        raise NotImplementedError

    def block(self, worker, *, reason):
        return CallResult(ok=True, request={"reason": reason},
                          response={"note": f"{self.label} has no block API; blocked here only."})

    def notify(self, study, workers, *, subject, message):
        raise PlatformError(f"{self.label} cannot message workers through its API; nothing was sent.")

    def expire(self, study, hits):
        raise PlatformError(f"Close {self.label} studies on its own site; nothing was sent.")
