"""Background jobs of exports: a thin wrapper that loads a snapshot and calls the service."""

import logging

from annotation.models import Snapshot
from annotation.snapshots import build_snapshot
from crowdbench.celery import app

logger = logging.getLogger(__name__)


@app.task(name="tasks.build_snapshot", acks_late=True)
def build_snapshot_job(snapshot_id):
    snapshot = Snapshot.objects.filter(pk=snapshot_id).first()
    if snapshot is None:
        logger.warning("Snapshot %s no longer exists; nothing built.", snapshot_id)
        return None
    return build_snapshot(snapshot=snapshot).status
