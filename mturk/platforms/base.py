"""What every platform does for us. Services (mturk/services.py) hold the rules and the records;
a backend only speaks its platform's API."""

from dataclasses import dataclass, field
from datetime import datetime

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


@dataclass
class CallResult:
    ok: bool
    request: dict
    response: dict
    error: str = ""


class Backend:
    platform = ""
    #: Whether work is published as one platform task per unit (MTurk HITs) or as places in a
    #: study whose participants draw units from our queue.
    publishes_per_unit = False

    def publish(self, study, *, units, reward):
        raise PlatformError(f"{self.platform} studies are published on its own site.")

    def records(self, study, *, hits=None):
        """Every PlatformRecord of the study (or of these HITs)."""
        raise NotImplementedError

    def verify(self, submission):
        """The platform's record of this submission, fetched now; raises if it is not ours."""
        raise NotImplementedError

    def approve(self, submissions, *, feedback):
        """{submission.pk: CallResult}."""
        raise NotImplementedError

    def reject(self, submissions, *, message, category=""):
        raise NotImplementedError

    def pay_bonus(self, bonus):
        raise NotImplementedError

    def block(self, worker, *, reason):
        return CallResult(ok=True, request={"reason": reason},
                          response={"note": f"{self.platform} has no block API; blocked here only."})

    def notify(self, study, workers, *, subject, message):
        raise PlatformError(f"{self.platform} cannot message workers through its API.")

    def expire(self, study, hits):
        raise PlatformError(f"Close {self.platform} studies on its own site.")
