"""Background jobs of exports: a thin wrapper that loads a snapshot and calls the service."""

import logging

from annotation.datasets.snapshots import build_snapshot
from annotation.models import Snapshot
from crowdbench.celery import app
from tasks.jobs import JOB_OPTIONS, lease

logger = logging.getLogger(__name__)


@app.task(name="tasks.build_snapshot", **JOB_OPTIONS)
def build_snapshot_job(snapshot_id):
    with lease("snapshot", snapshot_id) as mine:
        if not mine:
            return None
        snapshot = Snapshot.objects.filter(pk=snapshot_id).first()
        if snapshot is None:
            logger.warning("Snapshot %s no longer exists; nothing built.", snapshot_id)
            return None
        return build_snapshot(snapshot=snapshot).status
