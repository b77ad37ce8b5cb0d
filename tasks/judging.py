"""Background jobs of LLM judging: a thin wrapper that loads a judge run and calls the service."""

import logging

from annotation.judge import run_judge
from annotation.models import JudgeRun
from crowdbench.celery import app
from tasks.pipeline import MODEL_CALL_RETRIES

logger = logging.getLogger(__name__)


# A retry resumes: every answer already received is cached, so only the rest is paid for.
@app.task(name="tasks.run_judge", **MODEL_CALL_RETRIES)
def run_judge_job(run_id):
    run = JudgeRun.objects.select_related("study").filter(pk=run_id).first()
    if run is None:
        logger.warning("Judge run %s no longer exists; nothing judged.", run_id)
        return None
    return run_judge(run=run).status
