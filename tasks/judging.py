"""Background jobs of LLM judging: a thin wrapper that loads a judge run and calls the service."""

import logging

from django.conf import settings

from annotation.judge import run_judge
from annotation.models import JudgeRun
from crowdbench.celery import app
from tasks.pipeline import TRANSIENT_OPENAI_ERRORS

logger = logging.getLogger(__name__)


@app.task(
    name="tasks.run_judge",
    autoretry_for=TRANSIENT_OPENAI_ERRORS,
    # A retry resumes: every answer already received is cached, so only the rest is paid for.
    retry_backoff=settings.REFERENCE_JOB_RETRY_BACKOFF_SECONDS,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=5,
    acks_late=True,
)
def run_judge_job(run_id):
    run = JudgeRun.objects.select_related("study").filter(pk=run_id).first()
    if run is None:
        logger.warning("Judge run %s no longer exists; nothing judged.", run_id)
        return None
    return run_judge(run=run).status
