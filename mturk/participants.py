"""Study participants (CloudResearch Connect, Prolific): who may act as one, how much of the study
they have done, and stopping.

A participant id in a study link is no secret. So a participant is first admitted to one browser,
and any later claim to the same id from elsewhere is checked with the platform before it sees
their work or their completion code (mturk/identity.py). Which browser holds which participant is
the web layer's to remember; it tells `admit_participant` whether this one does.
"""

from django.db.models import Count, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from annotation.models import Assignment
from annotation.queue import return_held
from annotation.workforce import workers_with_standing
from mturk import identity


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
        done_in_study_id=Value(study.pk), done_count=Coalesce(Subquery(done), 0))


def done_in_study(worker, study):
    """How many of the study's tasks this worker has submitted."""
    if getattr(worker, "done_in_study_id", None) == study.pk:
        return worker.done_count
    return _submitted_in(study, worker).count()


def admit_participant(*, arrival, study, known_here):
    """The Worker a StudyArrival names, once it may act as them here.

    `known_here(worker_id)` says whether this browser was admitted as that worker before. A new
    participant is admitted at once; a known one arriving from elsewhere only when the platform
    confirms the claim. Raises IdentityRefused.
    """
    worker, created = participants_of(study).get_or_create(
        platform=study.platform, external_id=arrival.participant_id)
    if created:
        # A row just made carries none of the annotations: one query for them all, where each
        # check of the request (standing twice, progress once) would otherwise ask its own.
        return participants_of(study).get(pk=worker.pk)
    if not known_here(worker.pk):
        identity.confirm_participant(study=study, participant_id=arrival.participant_id,
                                     platform_session_id=arrival.session_id)
    return worker


def stop_participating(*, worker, study):
    """The participant stops: any task they hold in the study goes back to the pool. Whether they
    have earned the code is `done_in_study`'s to say."""
    return return_held(worker=worker, platform_listing_id=study.external_id)
