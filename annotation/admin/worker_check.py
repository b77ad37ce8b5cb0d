"""Whether a Celery worker is answering, so the admin can say that queued jobs will wait.

A job queued with no worker running sits in the broker silently; a researcher sees "Pending"
forever. Asking the workers with `celery inspect ping` costs up to the timeout, so the answer is
kept briefly and shared by every page of this process.
"""

from crowdbench import shared_cache

# The embedded default's file broker is polled once a second, so a worker's pong takes about a
# second to arrive; the ping returns at the first pong (limit=1), so this is paid in full only
# when no worker answers.
PING_TIMEOUT_SECONDS = 2.0
ANSWER_CACHED_SECONDS = 30
_CACHE_KEY = "crowdbench:celery-workers-answering"

NO_WORKER_MESSAGE = (
    "No Celery worker is answering, so queued jobs (work units, references, judge runs, snapshots) "
    "will wait until one starts: run `celery -A crowdbench worker` with the same settings "
    "(`make run` starts one)."
)


def workers_answering():
    """True when at least one worker answered a ping in the last half minute."""
    answer = shared_cache.get(_CACHE_KEY)
    if answer is None:
        answer = _ping()
        shared_cache.set(_CACHE_KEY, answer, ANSWER_CACHED_SECONDS)
    return answer


def _ping():
    from crowdbench.celery import app

    if app.conf.task_always_eager:
        # Jobs run inside the request; nothing waits for a worker.
        return True
    try:
        return bool(app.control.ping(timeout=PING_TIMEOUT_SECONDS, limit=1))
    except Exception:
        # An unreachable broker (Redis down, a folder missing) means the same thing to a
        # researcher: nothing will run the queued jobs. Celery raises many types for it.
        return False


BUSY_OR_ABSENT_MESSAGE = (
    "No Celery worker answered a ping. A worker with a single process cannot answer while it runs a "
    "job, so if the running job below is moving, queued jobs will run after it; if it is not, no "
    "worker is running and queued jobs will wait until one starts: run `celery -A crowdbench "
    "worker` with the same settings (`make run` starts one)."
)


def no_worker_warning():
    """The warning to show, or "" when a worker answers."""
    if workers_answering():
        return ""
    from annotation.models import JudgeRun, Snapshot

    busy = (JudgeRun.objects.filter(status=JudgeRun.Status.RUNNING).exists()
            or Snapshot.objects.filter(status=Snapshot.Status.RUNNING).exists())
    return BUSY_OR_ABSENT_MESSAGE if busy else NO_WORKER_MESSAGE


def say_if_jobs_will_wait(modeladmin, request):
    """After an admin action queued a job: warn, once, when no worker will run it."""
    from django.contrib import messages

    warning = no_worker_warning()
    if warning:
        modeladmin.message_user(request, warning, messages.WARNING)
