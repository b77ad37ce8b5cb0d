"""The job that sends a delivery: load by id, attempt under the delivery's lease, and come back
when the next attempt is due."""

from crowdbench.celery import app
from tasks.jobs import JOB_OPTIONS, lease
from webhooks.sending import DELIVER_JOB, attempt


class NotDeliveredYet(Exception):
    """Shown on the job's record between attempts; the delivery log says why."""


@app.task(name=DELIVER_JOB, bind=True, **JOB_OPTIONS)
def deliver_job(self, delivery_id):
    with lease("webhook_delivery", delivery_id) as mine:
        if not mine:
            return None
        wait = attempt(delivery_id=delivery_id)
    if wait is not None:
        # The attempts are counted and bounded on the delivery (WEBHOOK_MAX_ATTEMPTS), not here.
        raise self.retry(countdown=wait, max_retries=None,
                         exc=NotDeliveredYet(f"delivery {delivery_id}: next attempt in {wait:.0f} s"))
    return delivery_id
