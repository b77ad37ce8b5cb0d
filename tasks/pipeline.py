"""Background jobs of the collection pipeline: thin wrappers that load by id and call a service."""

import logging

import openai
from django.conf import settings

from annotation.models import Instance, InstructionFamily
from annotation.queue import expire_leases
from annotation.references import generate_reference
from annotation.services import create_work_units
from crowdbench.celery import app

logger = logging.getLogger(__name__)

# The openai client has already retried these within the call; the job retries them again later
# with its own growing backoff, to ride out a longer outage or rate limit. Any other error is
# ours or the model's and would only fail again.
TRANSIENT_OPENAI_ERRORS = (
    openai.RateLimitError,
    openai.APIConnectionError,
    openai.APITimeoutError,
    openai.InternalServerError,
)
# For every job that calls a model. With the default 30 s base the retries come after up to 30 s,
# 1, 2, 4 and 8 min, enough to ride out a rate-limit window; acks_late re-runs a job whose worker
# died, and the jobs are idempotent (one reference per prompt, judge calls cached by request).
MODEL_CALL_RETRIES = {
    "autoretry_for": TRANSIENT_OPENAI_ERRORS,
    "retry_backoff": settings.MODEL_JOB_RETRY_BACKOFF_SECONDS,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": 5,
    "acks_late": True,
}


@app.task(name="tasks.create_work_units")
def create_work_units_job(family_id, stage):
    family = InstructionFamily.objects.filter(pk=family_id).first()
    if family is None:
        logger.warning("Instruction family %s no longer exists; no work units made.", family_id)
        return 0
    return create_work_units(family=family, stage=stage)


@app.task(name="tasks.generate_reference", **MODEL_CALL_RETRIES)
def generate_reference_job(instance_id):
    instance = Instance.objects.select_related("current_caption").filter(pk=instance_id).first()
    if instance is None:
        logger.warning("Instance %s no longer exists; no reference generated.", instance_id)
        return None
    reference = generate_reference(instance=instance)
    return reference.pk if reference else None


@app.task(name="tasks.expire_leases")
def expire_leases_job():
    return expire_leases()
