"""Who the queue may give a stage's units to (the rules; the tests that earn a place are in
mturk/qualifications.py, since on MTurk they are a platform qualification too)."""

from django.db.models import Exists, OuterRef

from annotation.models import StageQualification, Worker, WorkerBlock, WorkerQualification


def may_work(worker, stage):
    """Whether the queue may give this worker units of this stage: not blocked, and qualified
    (and not paused) where the stage has a qualification test."""
    # One query: this runs on every "next unit" request.
    checks = Worker.objects.filter(pk=worker.pk).annotate(
        blocked=Exists(WorkerBlock.objects.filter(worker=OuterRef("pk"), active=True)),
        tested=Exists(StageQualification.objects.filter(stage=stage)),
        qualified=Exists(WorkerQualification.objects.filter(
            qualification__stage=stage, worker=OuterRef("pk"),
            status=WorkerQualification.Status.QUALIFIED,
        )),
    ).values("blocked", "tested", "qualified").first()
    if checks is None or checks["blocked"]:
        return False
    if worker.platform in (Worker.Platform.LOCAL, Worker.Platform.IMPORT):
        # In-house annotators are trained in person (as the Prometheus-Vision authors did).
        return True
    return not checks["tested"] or checks["qualified"]
