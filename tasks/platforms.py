"""Crowd platform jobs: thin wrappers around mturk.services."""

import logging

from django.conf import settings

from annotation.models import WorkerQualification
from crowdbench.celery import app
from mturk.services import qualifying, syncing

logger = logging.getLogger(__name__)


@app.task(name="tasks.sync_platforms")
def sync_platforms_job():
    done = syncing.sync_open_studies()
    qualifying.push_pending_mturk_qualifications()
    return done


@app.task(name="tasks.poll_mturk_notifications")
def poll_mturk_notifications_job():
    if not settings.MTURK_SQS_QUEUE_URL:
        return 0
    return syncing.poll_mturk_notifications()


@app.task(name="tasks.grant_mturk_qualification")
def grant_mturk_qualification_job(worker_qualification_id):
    granted = (WorkerQualification.objects.select_related("worker", "qualification")
               .filter(pk=worker_qualification_id).first())
    if granted is None:
        logger.warning("Worker qualification %s no longer exists.", worker_qualification_id)
        return False
    return qualifying.grant_mturk_qualification(granted)
