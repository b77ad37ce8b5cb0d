"""Study participants (CloudResearch Connect, Prolific): who may act as one, how much of the study
they have done, stopping, and being finished; and the stage page's one call (`next_step_asked`),
which answers a study participant here and an in-house annotator through the crowd work's own
decision.

A participant id in a study link is no secret. So a participant is first admitted to one browser,
and any later claim to the same id from elsewhere is checked with the platform before it sees
their work or their completion code (mturk/identity.py). Which browser holds which participant is
the web layer's to remember; it tells `admit_participant` whether this one does.

The reply that tells a browser it holds a new participant can be lost after their row committed
(a web process killed mid-reply). So a new participant's row is made only by a request carrying an
arrival key the web layer gave that browser a moment before, kept on the row: the same request
again, reloaded, is the same browser, and needs no platform to say so (issue 38).

Once shown the completion code, a participant has entered it on their platform, or will: the
platform's submission (Prolific's SESSION_ID, Connect's assignmentId) is complete and paid as it
stands. So the study link, opened again in that session, shows the code again and hands out no
more tasks. Both platforms give a participant one submission per study; a new one, should the
platform start it (a place given again after a return), comes with a new session id, and opens
tasks once the platform confirms that session is theirs, since an id typed into the link would
otherwise buy a second round of work that no submission pays for.
"""

from dataclasses import dataclass, replace

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django_ratelimit.core import _split_rate

from annotation.crowdwork.leases import return_held
from annotation.crowdwork.next_step import NextStep, Step, next_step, next_step_of_annotator
from annotation.crowdwork.queue import locked_for_leasing
from annotation.crowdwork.standing import workers_with_standing
from annotation.exceptions import WorkerFacingError
from annotation.models import Assignment, Worker
from crowdbench import shared_cache
from mturk import identity, links
from mturk.models import CrowdStudy, StudyCompletion

# How long a platform's confirmation of a new session is trusted, so that each next task of it
# does not ask the platform again.
_SESSION_CONFIRMED_SECONDS = 24 * 3600


class TooManyNewParticipants(WorkerFacingError):
    """More new participant ids arrived from one address than a study admits in a while; the page
    asks to try again after `retry_after` seconds, the period of STUDY_NEW_PARTICIPANTS_RATE."""

    def __init__(self):
        super().__init__(
            "Too many new participants have started this study from your network in a short time, so no new "
            "one is admitted from it for now. If you are a participant, please try again later, or message "
            "the researchers through your platform.")
        self.retry_after = _split_rate(settings.STUDY_NEW_PARTICIPANTS_RATE)[1]


def _may_admit_new(study, client_address):
    """Another new participant id from this client's address in this study, within
    STUDY_NEW_PARTICIPANTS_RATE (on the shared cache): one person with a study link could otherwise
    open many made-up ids, hold many leases and decide majorities. While the cache is unreachable
    every new id is admitted: refusing them would stop a study for everyone."""
    return not shared_cache.throttled(client_address, group=f"crowdbench.study-arrivals.{study.pk}",
                                      rate=settings.STUDY_NEW_PARTICIPANTS_RATE)


def _submitted_in(study, worker):
    return Assignment.objects.filter(
        worker=worker, status=Assignment.Status.SUBMITTED, platform_listing_id=study.external_id,
        unit__stage=study.stage,
    )


def _progress_in(study):
    done = _submitted_in(study, OuterRef("pk")).order_by().values("worker").annotate(
        n=Count("pk")).values("n")
    return {"done_in_study_id": Value(study.pk), "done_count": Coalesce(Subquery(done), 0),
            "finished_in_study": Exists(StudyCompletion.objects.filter(study=study, worker=OuterRef("pk")))}


def done_in_study(worker, study):
    """How many of the study's tasks this worker has submitted."""
    if getattr(worker, "done_in_study_id", None) == study.pk:
        return worker.done_count
    return _submitted_in(study, worker).count()


class ArrivalKeyNeeded(Exception):
    """A new participant id arrived without an arrival key: the web layer gives the browser one (for
    `study`) and sends it back; the row is made by the request that brings it."""

    def __init__(self, study):
        super().__init__(study)
        self.study = study


ARRIVAL_EXPIRED = (
    "This study page was first opened too long ago to be reloaded in a browser that does not hold "
    "your place in the study. Please continue in the browser where you started; if you cannot, "
    "message the researchers through your platform. Nothing was shown or recorded here."
)
ARRIVAL_ELSEWHERE = (
    "This study page was opened in another browser, which holds your place in the study. Please continue "
    "there; if you cannot, message the researchers through your platform. Nothing was shown or recorded here."
)
ARRIVAL_FORGED = (
    "This study link has been altered, so it cannot be opened here. Please open the study again "
    "from your platform; if this page comes back, message the researchers through your platform. "
    "Nothing was shown or recorded here."
)


@dataclass(frozen=True)
class ArrivalToken:
    """What a request's arrival token says (the web layer signs and reads it): the study and the
    participant id it was given for and its key, or why it is no good (`problem`)."""

    study_id: int | None = None
    participant_id: str = ""
    key: str = ""
    problem: str = ""

    def key_for(self, study, arrival):
        """(the key, when the token was given for this study's participant, else ""; why a token
        carried here is no good, else "")."""
        if self.study_id is not None and (self.study_id, self.participant_id) != (study.pk, arrival.participant_id):
            return "", ARRIVAL_FORGED
        if self.problem or not self.key:
            return "", self.problem
        return self.key, ""


def admit_participant(*, arrival, study, known_here, arrival_key="", client_address=None):
    """The Worker a StudyArrival names, once it may act as them here.

    `known_here(worker_id)` says whether this browser was admitted as that worker before. A new
    participant is admitted while the throttle of new ids from `client_address` lets one more in
    (an id nobody confirmed yet, mturk/services/confirming.py; None, for no web request, is not
    counted), and only with
    an `arrival_key` (else ArrivalKeyNeeded), which their row keeps. A known one is admitted where
    they are known, by the key that made their row (the first arrival again, its reply lost), or
    when the platform confirms the claim. Raises IdentityRefused, or TooManyNewParticipants.
    """
    same_id = Worker.objects.filter(platform=study.platform, external_id=arrival.participant_id)
    worker = same_id.first()
    if worker is None:
        if not arrival_key:
            raise ArrivalKeyNeeded(study)
        if client_address is not None and not _may_admit_new(study, client_address):
            raise TooManyNewParticipants()
        try:
            with transaction.atomic():
                return Worker.objects.create(platform=study.platform, external_id=arrival.participant_id,
                                             first_arrival_key=arrival_key)
        except IntegrityError:
            return same_id.get()  # the same id's other tab made it first: it is the same participant
    if known_here(worker.pk) or (arrival_key and worker.first_arrival_key == arrival_key):
        return worker
    identity.confirm_participant(study=study, participant_id=arrival.participant_id,
                                 platform_session_id=arrival.session_id)
    return worker


def admit_arrival(*, arrival, study, arrival_token, known_here, client_address):
    """`admit_participant` for a study link's request, which carries its ArrivalToken and comes from
    a browser holding the participants `known_here` (their ids), at `client_address`."""
    key, bad_token = arrival_token.key_for(study, arrival)
    try:
        return admit_participant(arrival=arrival, study=study, arrival_key=key,
                                 known_here=known_here.__contains__, client_address=client_address)
    except identity.IdentityRefused:
        # The platform did not confirm the claim either: say what was wrong with the token.
        if bad_token:
            raise identity.IdentityRefused(bad_token) from None
        raise


def stop_participating(*, worker, study):
    """The participant stops: any task they hold in the study goes back to the pool. Whether they
    have earned the code is `done_in_study`'s to say."""
    return return_held(worker=worker, platform_listing_id=study.external_id)


def finish_participating(*, worker, study, platform_session_id):
    """The participant is shown the study's code: any task they hold goes back to the pool, and
    this platform session is finished (`finished`). Showing the code again changes nothing."""
    stop_participating(worker=worker, study=study)
    completion, _ = StudyCompletion.objects.get_or_create(study=study, worker=worker,
                                                          platform_session_id=platform_session_id)
    return completion


def _finished_sessions(worker, study):
    if getattr(worker, "done_in_study_id", None) == study.pk and not worker.finished_in_study:
        return frozenset()  # fetched with the worker (next_step_of_participant): no query on the way to every next task
    return frozenset(StudyCompletion.objects.filter(study=study, worker=worker)
                     .values_list("platform_session_id", flat=True))


def finished(*, worker, study, platform_session_id):
    """Whether the participant has been shown the study's code for this platform session, so the
    study link shows it again and leases nothing.

    A link without a session id is the session they finished in. A session other than every one
    they finished is a new submission only when the platform confirms it is theirs in this study;
    anything else (no platform API, an id of somebody else's, a typo) is the finished one.
    """
    sessions = _finished_sessions(worker, study)
    if not sessions:
        return False
    if not platform_session_id or platform_session_id in sessions:
        return True
    return not identity.participant_confirmed(study=study, participant_id=worker.external_id,
                                              platform_session_id=platform_session_id,
                                              remember_seconds=_SESSION_CONFIRMED_SECONDS)


def earned_code(*, worker, study, platform_session_id):
    """Whether the participant may be given the code now: a task of the study submitted, in this
    platform session when they were given the code in another one already."""
    if not done_in_study(worker, study):
        return False
    others = _finished_sessions(worker, study) - {platform_session_id}
    if not others or not platform_session_id:
        return True
    return _submitted_in(study, worker).filter(platform_assignment_id=platform_session_id).exists()


def next_step_in_study(*, worker, study, platform_session_id, given_back_too=True, shows_gold=False):
    """What a study participant is shown next (annotation.crowdwork.next_step, in the study's family), with the
    study's completion code around it: shown again once they have it in this platform session, and
    given (they are finished) when nothing is left for them after a task of theirs is saved."""
    shown_the_code = finished(worker=worker, study=study, platform_session_id=platform_session_id)
    completion = links.completion(study)
    if shown_the_code:
        return NextStep(Step.COMPLETION, "the participant was shown the code in this session", again=True,
                        worker=worker, completion=completion)
    # A study naming no family draws on every family of no group, never on another group's.
    step = next_step(worker=worker, stage=study.stage, family=study.family or study.families_drawn_on(),
                     platform_assignment_id=platform_session_id, platform_listing_id=study.external_id,
                     given_back_too=given_back_too, shows_gold=shows_gold)
    if step.kind == Step.PAUSED:
        return replace(step, may_finish=bool(done_in_study(worker, study)))
    if step.kind == Step.NOTHING and earned_code(worker=worker, study=study, platform_session_id=platform_session_id):
        finish_participating(worker=worker, study=study, platform_session_id=platform_session_id)
        return NextStep(Step.COMPLETION, "nothing is left for the participant, who has done a task of the study",
                        worker=worker, completion=completion)
    if step.kind in (Step.LEASE, Step.GOLD):
        return replace(step, done=done_in_study(worker, study))
    return step


def next_step_of_participant(*, study, worker_id, platform_session_id, known_here, given_back_too=True,
                             shows_gold=False):
    """`next_step_in_study` for the participant a study session names, fetched with their standing
    in the study's stage and their progress in the study (so that the decision asks neither
    separately) and the lock their lease needs, in the decision's transaction: the request every
    participant makes after every answer. None when the study has no such participant; raises
    IdentityRefused when `known_here(worker_id)` says this browser was not admitted as them."""
    progress = _progress_in(study)
    with transaction.atomic():
        worker = locked_for_leasing(workers_with_standing(study.stage).annotate(**progress).filter(pk=worker_id))
        if worker is None:
            return None
        if not known_here(worker.pk):
            raise identity.IdentityRefused(identity.STUDY_NOT_CONFIRMED)
        return next_step_in_study(worker=worker, study=study, platform_session_id=platform_session_id,
                                  given_back_too=given_back_too, shows_gold=shows_gold)


class StudyNotKnown(WorkerFacingError):
    """A study link naming a study that is not known here, or one of another stage."""

    def __init__(self):
        super().__init__("This study is not known here. Please tell the researchers.")


@dataclass(frozen=True)
class StageAsk:
    """What a stage page's request asks, read from it once at the web layer's edge. A study
    participant is named by the signed session of a study they work in (`worker_id`, `study_id`) or
    by a study link's `arrival` with its `arrival_token`; with them come the participants this
    browser holds and the client's address, by which new participant ids are counted. A request
    naming neither is an in-house annotator's: the signed-in `user`, with the `family` they chose
    (None for any)."""

    stage: str
    platform_session_id: str = ""
    worker_id: int | None = None
    study_id: int | None = None
    arrival: links.StudyArrival | None = None
    arrival_token: ArrivalToken = ArrivalToken()
    known_here: frozenset = frozenset()
    given_back_too: bool = True
    client_address: str = ""
    user: object = None
    family: object = None

    @property
    def in_study(self):
        return self.worker_id is not None or self.arrival is not None


def _study_asked(ask):
    """The study a request names, by its session, or None; by its arrival, or StudyNotKnown."""
    if ask.arrival is None:
        return CrowdStudy.objects.select_related("family").filter(pk=ask.study_id, stage=ask.stage).first()
    study = CrowdStudy.objects.select_related("family").filter(
        platform=ask.arrival.platform, external_id=ask.arrival.study_id).first()
    if study is None or study.stage != ask.stage:
        raise StudyNotKnown()
    return study


def may_stop(ask):
    """For the page that offers the next task after a give-back: whether the participant a study
    session names, known to this browser, has done a task of the study, so may stop now and take
    the code; None when the session names no study of the stage (False without a session)."""
    if ask.worker_id is None:
        return False
    study = _study_asked(ask)
    if study is None:
        return None
    worker = Worker.objects.filter(pk=ask.worker_id).first()
    return bool(worker and worker.pk in ask.known_here and done_in_study(worker, study))


def next_step_asked(ask, *, shows_gold=False):
    """What the person a stage page's request names is shown next: the one call of a stage page.

    Returns (study, step). A study participant's step is `next_step_in_study`'s, for the study a
    session or a link names: (None, None) when a session names no study of the stage or the study
    no such participant. A study link's arrival is admitted first (`admit_arrival`), and is then
    asked for like a session, this browser now holding them. Raises StudyNotKnown,
    ArrivalKeyNeeded, IdentityRefused or TooManyNewParticipants. An in-house annotator is no study
    participant: theirs is the crowd work's own (`next_step_of_annotator`), with no study.
    """
    if ask.in_study:
        study = _study_asked(ask)
        if study is None:
            return None, None
        worker_id, known_here = ask.worker_id, ask.known_here
        if ask.arrival is not None:
            worker_id = admit_arrival(arrival=ask.arrival, study=study, arrival_token=ask.arrival_token,
                                      known_here=known_here, client_address=ask.client_address).pk
            known_here = known_here | {worker_id}
        return study, next_step_of_participant(
            study=study, worker_id=worker_id, platform_session_id=ask.platform_session_id,
            known_here=known_here.__contains__, given_back_too=ask.given_back_too, shows_gold=shows_gold)
    return None, next_step_of_annotator(user=ask.user, stage=ask.stage, family=ask.family,
                                        given_back_too=ask.given_back_too, shows_gold=shows_gold)
