"""The one door every background job goes out of, below the domain.

`enqueue` sends a job by name once the transaction that made it owed has committed; a broker that
cannot be reached is logged, never raised, so an annotator's saved work never turns into a 500 and
the outbox sweep (tasks/outbox.py) sends the job later. The domain names jobs by their Celery name
and never imports tasks/; the tasks app keeps each job's record by listening to `job_sent`.
"""

import logging

from django.db import transaction
from django.dispatch import Signal

from crowdbench.celery import app

logger = logging.getLogger(__name__)

# Sent after every attempt to queue a job, with `name`, `args` and `sent` (False: the broker
# refused it, so the sweep should send it at once rather than wait).
job_sent = Signal()


def enqueue(name, *args):
    """Send job `name` with `args` after the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: send(name, *args))


def send(name, *args):
    """Send now; True when the broker took the job. A failure is logged for the sweep to mend."""
    try:
        if app.conf.task_always_eager:
            # send_task ignores eager mode; run the job here as .delay() would.
            app.loader.import_default_modules()
            app.tasks[name].apply(args=list(args))
        else:
            app.send_task(name, args=list(args))
    except Exception:  # noqa: BLE001 - any broker failure: the owed work stays in the database
        logger.exception("Could not queue %s%s; the outbox sweep will queue it again.", name, args)
        sent = False
    else:
        sent = True
    job_sent.send(sender=send, name=name, args=list(args), sent=sent)
    return sent
