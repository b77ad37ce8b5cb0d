"""The database is the outbox: every piece of owed background work is read from domain state and
queued again when its job was lost (a broker without persistence, a failed enqueue, a worker
that died) and is neither running nor recently queued. Every job is idempotent under its lease,
so queuing one twice costs a message, never a second model call.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Max, Min
from django.utils import timezone

from annotation import llm
from annotation.collection.verification import WORKER_MODEL_JOB
from annotation.collection.worker_model_job import awaiting_worker_model
from annotation.crowdwork import stages
from annotation.judging.runner import ACTIVE_STATUSES
from annotation.models import EndpointCall, Instance, JudgeRun, Snapshot, StageConfig, Tournament
from annotation.preferences.tournaments import round_due
from annotation.scoring import DEFAULT_ROUNDS, freshness
from crowdbench.celery import app
from crowdbench.jobs import send
from tasks.jobs import job_key, leased_elsewhere
from tasks.models import Job
from tasks.pipeline import NEXT_ROUND_JOB
from tasks.scoring import board_lease
from webhooks.models import Delivery

logger = logging.getLogger(__name__)


# The tasks whose work owed_jobs reads from domain state: a row of one of them that is not owed is
# not waiting for anything.
SWEPT_TASKS = ("tasks.generate_reference", "tasks.create_work_units", "tasks.run_judge", "tasks.generate_answers",
               WORKER_MODEL_JOB, NEXT_ROUND_JOB, "tasks.build_snapshot", freshness.JOB, "webhooks.deliver")
UNFINISHED = (Job.Status.QUEUED, Job.Status.RETRYING, Job.Status.RUNNING)


def owed_jobs():
    """(task name, args, lease kind, lease number, owed since) of every piece of owed work."""
    owed = []
    if llm.reference_model_configured():
        waiting = Instance.objects.filter(status=Instance.Status.AWAITING_REFERENCE,
                                          current_caption__isnull=False)
        owed += [("tasks.generate_reference", (pk,), "reference", pk, since)
                 for pk, since in waiting.values_list("pk", "updated_at")]
    for config in StageConfig.objects.filter(launched_at__isnull=False).select_related("family"):
        if stages.units_owed(family=config.family, stage=config.stage):
            owed.append(("tasks.create_work_units", (config.family_id, config.stage), None, None,
                         config.launched_at))
    runs = JudgeRun.objects.filter(status__in=ACTIVE_STATUSES)
    owed += [("tasks.run_judge", (pk,), "judge_run", pk, since)
             for pk, since in runs.values_list("pk", "created_at")]
    # Endpoint answers whose calls are not settled: the chunk that made them was lost or killed.
    unsettled = (EndpointCall.objects.filter(status__in=(EndpointCall.Status.PENDING, EndpointCall.Status.SENT))
                 .values("endpoint__tournament_id").annotate(since=Min("created_at")))
    owed += [("tasks.generate_answers", (row["endpoint__tournament_id"],), "generate_answers",
              row["endpoint__tournament_id"], row["since"]) for row in unsettled]
    waiting = awaiting_worker_model()
    if waiting:
        owed.append((WORKER_MODEL_JOB, (), "worker_models", 0, min(reference.created_at for reference in waiting)))
    # An active tournament whose battles are all answered is owed its next round.
    active = Tournament.objects.filter(sampling=Tournament.Sampling.ACTIVE, launched_at__isnull=False)
    owed += [(NEXT_ROUND_JOB, (tournament.pk,), "battle_round", tournament.pk,
              tournament.battles.aggregate(since=Max("created_at"))["since"])
             for tournament in active if round_due(tournament)]
    snapshots = Snapshot.objects.filter(status__in=(Snapshot.Status.PENDING, Snapshot.Status.RUNNING))
    owed += [("tasks.build_snapshot", (pk,), "snapshot", pk, since)
             for pk, since in snapshots.values_list("pk", "created_at")]
    # A leaderboard older than its judgements is owed since it was computed; its job is usually
    # on its way (queued by the change), so only one lost or refused is sent again.
    owed += [(freshness.JOB, (pk,), board_lease("overall", DEFAULT_ROUNDS), pk, since)
             for pk, since in freshness.stale_tournaments()]
    # A delivery due for its next attempt whose message was lost (between attempts, a retry waits
    # in the broker; one not yet due is not owed yet).
    due = Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=timezone.now())
    owed += [("webhooks.deliver", (pk,), "webhook_delivery", pk, since)
             for pk, since in due.values_list("pk", "next_attempt_at")]
    return owed


def _due(job, *, owed_since, cutoff):
    if job is None:
        return owed_since < cutoff
    if job.status == Job.Status.FAILED:
        # Failed with its reason shown; a researcher queues it again once the cause is fixed.
        return False
    if job.queued_at is None:
        return True
    return job.updated_at < cutoff


def _judge_chunks_busy(run_id, cutoff):
    # The start job ends once it has queued the chunks; the run is in hand while they move.
    return Job.objects.filter(key__startswith=f"tasks.judge_chunk:{run_id}:",
                              updated_at__gte=cutoff).exists()


def _answer_chunks_busy(tournament_id, cutoff):
    endpoints = EndpointCall.objects.filter(endpoint__tournament_id=tournament_id).values_list(
        "endpoint_id", flat=True).distinct()
    return any(Job.objects.filter(key__startswith=f"tasks.answer_chunk:{pk}:", updated_at__gte=cutoff).exists()
               for pk in endpoints)


def requeue_owed():
    """Queue again what is owed and lost; returns how many jobs were sent."""
    cutoff = timezone.now() - timedelta(seconds=settings.JOB_REQUEUE_AFTER_SECONDS)
    owed = owed_jobs()
    owed_keys = [job_key(name, args) for name, args, *_ in owed]
    jobs = Job.objects.in_bulk(owed_keys, field_name="key")
    sent = 0
    for (name, args, kind, number, since), key in zip(owed, owed_keys, strict=True):
        if not _due(jobs.get(key), owed_since=since, cutoff=cutoff):
            continue
        if kind is not None and leased_elsewhere(kind, number):
            continue
        if name == "tasks.run_judge" and _judge_chunks_busy(args[0], cutoff):
            continue
        if name == "tasks.generate_answers" and _answer_chunks_busy(args[0], cutoff):
            continue
        logger.info("Owed and not in hand: queuing %s%s again.", name, args)
        sent += send(name, *args)
    close_done_elsewhere(owed_keys=owed_keys, cutoff=cutoff)
    return sent


def close_done_elsewhere(*, owed_keys, cutoff):
    """Close the job rows that still say queued, retrying or running although nothing of their
    work is owed any more: its message was lost and another path did the work (a researcher pasted
    the reference, a later job made the units), or the work is no longer asked for. Left open, such
    a row says forever that the job is on its way. Rows touched since `cutoff` may still be in
    hand. Returns how many closed."""
    stale = (Job.objects.filter(task__in=SWEPT_TASKS, status__in=UNFINISHED, updated_at__lt=cutoff)
             .exclude(key__in=owed_keys))
    note = (f"Closed by the sweep on {timezone.now():%Y-%m-%d %H:%M} UTC: nothing of this job was owed any "
            "more (its work was done another way, or is no longer asked for).")
    closed = stale.update(status=Job.Status.DONE, note=note, updated_at=timezone.now())
    if closed:
        logger.info("Closed %d job row(s) whose work was no longer owed.", closed)
    return closed


@app.task(name="tasks.requeue_owed")
def requeue_owed_job():
    return requeue_owed()
