"""The job that sends a delivery: load by id, attempt under the delivery's lease, and queue itself
again for when the next attempt is due."""

import logging

from crowdbench.celery import app
from tasks.jobs import JOB_OPTIONS, lease
from webhooks.sending import DELIVER_JOB, attempt

logger = logging.getLogger(__name__)


@app.task(name=DELIVER_JOB, **JOB_OPTIONS)
def deliver_job(delivery_id):
    with lease("webhook_delivery", delivery_id) as mine:
        if not mine:
            return None
        wait = attempt(delivery_id=delivery_id)
    if wait is not None:
        # A new message rather than Celery's retry: the attempts are counted and bounded on the
        # delivery (WEBHOOK_MAX_ATTEMPTS), and the job's own retries stay for database errors.
        try:
            deliver_job.apply_async((delivery_id,), countdown=wait)
        except Exception:  # noqa: BLE001 - any broker failure: the delivery's row still says it is owed
            logger.exception("Could not queue delivery %s again; the outbox sweep will once it is due.", delivery_id)
    return wait
