"""Who the queue may give a stage's units to (the rules; the tests that earn a place are in
mturk/qualifications.py, since on MTurk they are a platform qualification too)."""

from django.db.models import Exists, OuterRef, Value

from annotation.models import StageQualification, Worker, WorkerBlock, WorkerQualification


def _standing(stage):
    return {
        "standing_stage": Value(stage),
        "blocked": Exists(WorkerBlock.objects.filter(worker=OuterRef("pk"), active=True)),
        "tested": Exists(StageQualification.objects.filter(stage=stage)),
        "qualified": Exists(WorkerQualification.objects.filter(
            qualification__stage=stage, worker=OuterRef("pk"),
            status=WorkerQualification.Status.QUALIFIED,
        )),
    }


def workers_with_standing(stage):
    """Workers fetched with what `may_work` needs to know for `stage`, so that fetching the worker
    of a "next unit" request answers it without a query of its own."""
    return Worker.objects.annotate(**_standing(stage))


def may_work(worker, stage):
    """Whether the queue may give this worker units of this stage: not blocked, and qualified
    (and not paused) where the stage has a qualification test."""
    # A "next unit" request asks this up to three times (the qualification gate, the gold offer,
    # the queue) of one Worker instance, which lives only as long as that request: it is answered
    # once per instance. A block or pause written meanwhile applies from the next request.
    answers = worker.__dict__.setdefault("_may_work_answers", {})
    if stage not in answers:
        if getattr(worker, "standing_stage", None) != stage:
            checks = workers_with_standing(stage).filter(pk=worker.pk).values(
                "blocked", "tested", "qualified").first()
            if checks is None:
                return False
            worker.blocked, worker.tested, worker.qualified = (
                checks["blocked"], checks["tested"], checks["qualified"])
            worker.standing_stage = stage
        answers[stage] = _allowed(worker)
    return answers[stage]


def _allowed(worker):
    if worker.blocked:
        return False
    if worker.platform in (Worker.Platform.LOCAL, Worker.Platform.IMPORT):
        # In-house annotators are trained in person (as the Prometheus-Vision authors did).
        return True
    return not worker.tested or worker.qualified
