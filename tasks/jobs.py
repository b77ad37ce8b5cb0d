"""The lease a job runs under, and the record of each job, for researchers and the outbox sweep.

Jobs go out through crowdbench/jobs.py (`enqueue`), which the domain calls by job name; this
module records each sending on the job's Job row (tasks/models.py). `lease` lets one copy of a
job run at a time: Redis delivers a message again when a worker dies or outlives the visibility
timeout, and the sweep may queue work whose message is still on its way. `RecordedJob` keeps the
Job row that says how the latest attempt ended.
"""

import logging
import zlib
from contextlib import contextmanager

from celery import Task
from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
)
from django.dispatch import receiver
from django.utils import timezone

from annotation import llm
from annotation.exceptions import AnnotationError
from crowdbench.jobs import job_sent
from tasks.models import Job

logger = logging.getLogger(__name__)

# Errors that a later attempt may not meet: the model's (annotation/llm.py) and a lost or
# restarting database.
TRANSIENT_ERRORS = (*llm.TRANSIENT_ERRORS, OperationalError, InterfaceError)


def job_key(name, args):
    return ":".join([name, *(str(arg) for arg in args)])


@receiver(job_sent)
def record_sending(sender, *, name, args, sent, **kwargs):
    try:
        # queued_at stays empty when the broker refused: the sweep sends such a job at once.
        Job.objects.update_or_create(
            key=job_key(name, args),
            defaults={"task": name, "args": list(args), "status": Job.Status.QUEUED, "error": "", "note": "",
                      "queued_at": timezone.now() if sent else None},
        )
    except DatabaseError:
        logger.exception("Could not record the queueing of %s%s.", name, tuple(args))


# --- leases ---------------------------------------------------------------------------------------


def _lock_ids(kind, number):
    # pg_try_advisory_lock(int4, int4): a namespace per kind of work, the object's id in it.
    namespace = zlib.crc32(kind.encode()) - 2**31
    return namespace, int(number)


@contextmanager
def lease(kind, number):
    """Yield True when this process may do the work (kind, number), False when another copy is.

    On PostgreSQL a session advisory lock: it dies with the worker's connection, so a killed
    worker never leaves work locked. The embedded default (SQLite) runs one worker; it always may.
    """
    if connection.vendor != "postgresql":
        yield True
        return
    ids = _lock_ids(kind, number)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", ids)
        held = cursor.fetchone()[0]
    if not held:
        logger.info("%s #%s is already being worked on; this copy exits.", kind, number)
        yield False
        return
    try:
        yield True
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", ids)
        except DatabaseError:
            # The connection is gone, and the lock with it.
            logger.warning("Lease on %s #%s ended with its connection.", kind, number)


def probe_silent_peers(sender, connection, **kwargs):
    """A `connection_created` receiver (tasks/apps.py): PostgreSQL probes this session's peer after
    DATABASE_KEEPALIVE_SECONDS of silence, six times, 1/6 of that apart, and ends the session when
    none is answered; and ends it when data it sent stays unacknowledged for twice that
    (`tcp_user_timeout`).

    The second is the case that matters: keepalive probes are sent only on an idle connection, so a
    host that died while a reply to it was on the wire is not probed at all, and the kernel's
    retransmissions (`tcp_retries2`) hold the session, its row locks and its advisory leases for
    about 15 minutes.

    A worker killed on a live machine has its connections closed by the kernel, and its leases end
    at once. A host that loses power or its network closes nothing: without probes PostgreSQL keeps
    its idle session (by default until the OS's keepalive, over two hours), and with it the leases
    it held, so the sweep (which leaves leased work alone) and every redelivered copy left that
    work undone all that time.
    """
    seconds = settings.DATABASE_KEEPALIVE_SECONDS
    if connection.vendor != "postgresql" or not seconds:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('tcp_keepalives_idle', %s, false), "
            "set_config('tcp_keepalives_interval', %s, false), set_config('tcp_keepalives_count', '6', false), "
            "set_config('tcp_user_timeout', %s, false)",
            [str(seconds), str(max(1, seconds // 6)), str(unacknowledged_limit_ms(seconds))],
        )


def unacknowledged_limit_ms(keepalive_seconds):
    """How long data PostgreSQL sent a session may stay unacknowledged before it ends the session:
    twice the keepalive, the same bound a silent dead peer gets."""
    return keepalive_seconds * 2 * 1000


def leased_elsewhere(kind, number):
    """True when some live session holds the lease (kind, number)."""
    if connection.vendor != "postgresql":
        return False
    namespace, number = _lock_ids(kind, number)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = (%s::int4)::oid AND objid = (%s::int4)::oid AND objsubid = 2)",
            [namespace, number],
        )
        return cursor.fetchone()[0]


# --- the record of each attempt ---------------------------------------------------------------------


class RecordedJob(Task):
    """A job whose attempts are recorded on its Job row, and on its domain row through `on_status`.

    `on_status(args, status, error)` (a staticmethod given to @app.task) lets a judge run, say,
    show "retrying" between attempts and "failed" with the reason once they are spent.
    """

    on_status = None

    def _record(self, args, status, error="", *, attempt=False):
        # A previous database error leaves the connection unusable until it is replaced.
        close_old_connections()
        try:
            key = job_key(self.name, args)
            job, _ = Job.objects.get_or_create(key=key, defaults={"task": self.name, "args": list(args)})
            job.status, job.error = status, error
            if attempt:
                job.attempts += 1
            job.save(update_fields=["status", "error", "attempts", "updated_at"])
            if self.on_status is not None:
                self.on_status(args, status, error)
        except DatabaseError:
            logger.exception("Could not record %s of %s%s.", status, self.name, tuple(args))

    def before_start(self, task_id, args, kwargs):
        self._record(args, Job.Status.RUNNING, attempt=True)

    def on_success(self, retval, task_id, args, kwargs):
        self._record(args, Job.Status.DONE)

    def on_retry(self, exc, task_id, args, kwargs, einfo):
        self._record(args, Job.Status.RETRYING,
                     f"Attempt {self.request.retries + 1} failed, retrying: {_reason(exc)}")

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        self._record(args, Job.Status.FAILED, _reason(exc))


def _reason(error):
    # A domain error already speaks to the researcher; anything else is named by its type.
    return str(error) if isinstance(error, AnnotationError) else f"{type(error).__name__}: {error}"


# The options of every job: recorded, retried on transient errors with growing backoff (with the
# default 30 s base after up to 30 s, 1, 2, 4 and 8 min: enough to ride out a rate-limit window or
# a database restart), acknowledged only once done so a dead worker's job is delivered again.
JOB_OPTIONS = {
    "base": RecordedJob,
    "autoretry_for": TRANSIENT_ERRORS,
    "retry_backoff": settings.MODEL_JOB_RETRY_BACKOFF_SECONDS,
    "retry_backoff_max": 600,
    "retry_jitter": settings.MODEL_JOB_RETRY_JITTER,
    "max_retries": 5,
    "acks_late": True,
}
