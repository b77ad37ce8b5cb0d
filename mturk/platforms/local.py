"""In-house annotators with accounts: the queue is the platform, and pay happens outside."""

from annotation.models import Worker
from mturk.platforms.base import Backend, CallResult


class LocalBackend(Backend):
    platform = Worker.Platform.LOCAL
    label = "in-house"

    def records(self, study, *, hits=None):
        return []

    def verify(self, submission):
        return None

    def _recorded(self, submissions, note):
        return {s.pk: CallResult(ok=True, request={}, response={"note": note}) for s in submissions}

    def approve(self, submissions, *, feedback):
        return self._recorded(submissions, "recorded here; in-house work is paid outside crowdbench")

    def reject(self, submissions, *, message, category=""):
        return self._recorded(submissions, "recorded here")

    def pay_bonus(self, bonus):
        return CallResult(ok=True, request={}, response={"note": "recorded; paid outside crowdbench"})

    def notify(self, study, workers, *, subject, message):
        return [CallResult(ok=True, request={"workers": len(workers)},
                           response={"note": "in-house annotators are told in person"})]
