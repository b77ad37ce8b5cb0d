"""Who the queue may give a stage's units to: workers, blocks and standing, read by the queue and
the next step beside it (the tests that earn a place are annotation/workforce/qualifications.py).

A Worker fetched with its standing carries it as `standing_stage` and the facts below; a change to
its block, qualification or pause drops them (Worker.forget_standing), so that they are asked again."""

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
    if getattr(worker, "standing_stage", None) == stage:
        return _allowed(worker.platform, worker.blocked, worker.tested, worker.qualified)
    # One query: this runs on every "next unit" request whose worker was not fetched with it.
    checks = workers_with_standing(stage).filter(pk=worker.pk).values(
        "blocked", "tested", "qualified").first()
    return checks is not None and _allowed(worker.platform, **checks)


def _local_identity(user):
    return {"platform": Worker.Platform.LOCAL, "external_id": f"user-{user.pk}"}


def _with_standing_in(stage):
    return workers_with_standing(stage) if stage else Worker.objects


def local_workers(user, *, stage=None):
    """The in-house annotator's Worker if they have one yet, with its standing in `stage`."""
    return _with_standing_in(stage).filter(**_local_identity(user))


def local_worker(user, *, stage=None):
    """The in-house annotator's Worker, made at their first task; with its standing in `stage`."""
    worker, _ = _with_standing_in(stage).get_or_create(**_local_identity(user), defaults={"user": user})
    return worker


def platform_worker(platform, external_id):
    """The Worker a platform knows as `external_id`, made at first sight. Call it only once the
    platform has confirmed the id (mturk/identity.py): a Worker row is no proof of anything."""
    worker, _ = Worker.objects.get_or_create(platform=platform, external_id=external_id)
    return worker


def _allowed(platform, blocked, tested, qualified):
    if blocked:
        return False
    if platform in Worker.IN_HOUSE:
        # In-house annotators are trained in person (as the Prometheus-Vision authors did).
        return True
    return not tested or qualified
