"""Study participants (CloudResearch Connect, Prolific): who may act as one, how much of the study
they have done, stopping, and being finished.

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

from dataclasses import replace

from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from annotation.crowdwork.leases import return_held
from annotation.crowdwork.next_step import NextStep, Step, next_step
from annotation.crowdwork.queue import locked_for_leasing
from annotation.exceptions import WorkerFacingError
from annotation.models import Assignment, Worker
from annotation.workforce.standing import workers_with_standing
from crowdbench import shared_cache
from mturk import identity, links
from mturk.models import StudyCompletion

# How long a platform's confirmation of a new session is trusted, so that each next task of it
# does not ask the platform again.
_SESSION_CONFIRMED_SECONDS = 24 * 3600


class TooManyNewParticipants(WorkerFacingError):
    """More new participant ids arrived from one address than a study admits in a while."""

    def __init__(self):
        super().__init__(
            "Too many new participants have started this study from your network in a short time, so no new "
            "one is admitted from it for now. If you are a participant, please try again later, or message "
            "the researchers through your platform.")


def _submitted_in(study, worker):
    return Assignment.objects.filter(
        worker=worker, status=Assignment.Status.SUBMITTED, platform_listing_id=study.external_id,
        unit__stage=study.stage,
    )


def participants_of(study):
    """Workers fetched with their standing in the study's stage and the count of their tasks in
    it, so the study's next-unit request asks neither separately."""
    done = _submitted_in(study, OuterRef("pk")).order_by().values("worker").annotate(
        n=Count("pk")).values("n")
    return workers_with_standing(study.stage).annotate(
        done_in_study_id=Value(study.pk), done_count=Coalesce(Subquery(done), 0),
        finished_in_study=Exists(StudyCompletion.objects.filter(study=study, worker=OuterRef("pk"))))


def done_in_study(worker, study):
    """How many of the study's tasks this worker has submitted."""
    if getattr(worker, "done_in_study_id", None) == study.pk:
        return worker.done_count
    return _submitted_in(study, worker).count()


class ArrivalKeyNeeded(Exception):
    """A new participant id arrived without an arrival key: the web layer gives the browser one and
    sends it back; the row is made by the request that brings it."""


def admit_participant(*, arrival, study, known_here, arrival_key="", may_admit_new=lambda: True):
    """The Worker a StudyArrival names, once it may act as them here.

    `known_here(worker_id)` says whether this browser was admitted as that worker before. A new
    participant is admitted while `may_admit_new()` lets one more in (the web layer's throttle of
    new ids per address: an id nobody confirmed yet, mturk/services/confirming.py), and only with
    an `arrival_key` (else ArrivalKeyNeeded), which their row keeps. A known one is admitted where
    they are known, by the key that made their row (the first arrival again, its reply lost), or
    when the platform confirms the claim. Raises IdentityRefused, or TooManyNewParticipants.
    """
    same_id = participants_of(study).filter(platform=study.platform, external_id=arrival.participant_id)
    worker = same_id.first()
    if worker is None:
        if not arrival_key:
            raise ArrivalKeyNeeded()
        if not may_admit_new():
            raise TooManyNewParticipants()
        try:
            with transaction.atomic():
                Worker.objects.create(platform=study.platform, external_id=arrival.participant_id,
                                      first_arrival_key=arrival_key)
        except IntegrityError:
            pass  # the same id's other tab made it first: it is the same participant
        # A row just made carries none of the annotations: one query for them all, where each
        # check of the request (standing twice, progress once) would otherwise ask its own.
        return same_id.get()
    if known_here(worker.pk) or (arrival_key and worker.first_arrival_key == arrival_key):
        return worker
    identity.confirm_participant(study=study, participant_id=arrival.participant_id,
                                 platform_session_id=arrival.session_id)
    return worker


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
        return set()  # fetched by participants_of: no query on the way to every next task
    return set(StudyCompletion.objects.filter(study=study, worker=worker)
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
    key = f"crowdbench:new-study-session:{study.pk}:{worker.pk}:{platform_session_id}"
    if shared_cache.get(key):
        return False
    try:
        identity.confirm_participant(study=study, participant_id=worker.external_id,
                                     platform_session_id=platform_session_id)
    except identity.IdentityRefused:
        return True
    shared_cache.set(key, True, _SESSION_CONFIRMED_SECONDS)
    return False


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
    if finished(worker=worker, study=study, platform_session_id=platform_session_id):
        return NextStep(Step.COMPLETION, "the participant was shown the code in this session", again=True,
                        worker=worker, completion=links.completion(study))
    # A study naming no family draws on every family of no group, never on another group's.
    step = next_step(worker=worker, stage=study.stage, family=study.family or study.families_drawn_on(),
                     platform_assignment_id=platform_session_id, platform_listing_id=study.external_id,
                     given_back_too=given_back_too, shows_gold=shows_gold)
    if step.kind == Step.PAUSED:
        return replace(step, may_finish=bool(done_in_study(worker, study)))
    if step.kind == Step.NOTHING and earned_code(worker=worker, study=study, platform_session_id=platform_session_id):
        finish_participating(worker=worker, study=study, platform_session_id=platform_session_id)
        return NextStep(Step.COMPLETION, "nothing is left for the participant, who has done a task of the study",
                        worker=worker, completion=links.completion(study))
    if step.kind in (Step.LEASE, Step.GOLD):
        return replace(step, done=done_in_study(worker, study))
    return step


def next_step_of_participant(*, study, worker_id, platform_session_id, known_here, given_back_too=True,
                             shows_gold=False):
    """`next_step_in_study` for the participant a study session names, fetched with their standing
    and progress and the lock their lease needs, in the decision's transaction: the request every
    participant makes after every answer. None when the study has no such participant; raises
    IdentityRefused when `known_here(worker_id)` says this browser was not admitted as them."""
    with transaction.atomic():
        worker = locked_for_leasing(participants_of(study).filter(pk=worker_id))
        if worker is None:
            return None
        if not known_here(worker.pk):
            raise identity.IdentityRefused(identity.STUDY_NOT_CONFIRMED)
        return next_step_in_study(worker=worker, study=study, platform_session_id=platform_session_id,
                                  given_back_too=given_back_too, shows_gold=shows_gold)
