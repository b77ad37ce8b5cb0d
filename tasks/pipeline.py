"""Background jobs of the collection pipeline: thin wrappers that load by id and call a service."""

import logging

from annotation.collection.references import generate_reference
from annotation.collection.verification import WORKER_MODEL_JOB
from annotation.collection.worker_model_job import decide_by_worker_models
from annotation.crowdwork.leases import expire_leases
from annotation.crowdwork.stages import create_work_units
from annotation.models import Instance, InstructionFamily
from annotation.preferences.tournaments import make_next_round
from crowdbench.celery import app
from tasks.jobs import JOB_OPTIONS, lease

logger = logging.getLogger(__name__)

NEXT_ROUND_JOB = "tasks.next_battle_round"


@app.task(name="tasks.create_work_units", **JOB_OPTIONS)
def create_work_units_job(family_id, stage):
    family = InstructionFamily.objects.filter(pk=family_id).first()
    if family is None:
        logger.warning("Instruction family %s no longer exists; no work units made.", family_id)
        return 0
    return create_work_units(family=family, stage=stage)


# Under a lease, so a second copy of the job (a redelivery, the outbox sweep) never pays the
# model a second time while the first is waiting for its answer.
@app.task(name="tasks.generate_reference", **JOB_OPTIONS)
def generate_reference_job(instance_id):
    with lease("reference", instance_id) as mine:
        if not mine:
            return None
        instance = Instance.objects.select_related("current_caption").filter(pk=instance_id).first()
        if instance is None:
            logger.warning("Instance %s no longer exists; no reference generated.", instance_id)
            return None
        reference = generate_reference(instance=instance)
        return reference.pk if reference else None


@app.task(name="tasks.expire_leases")
def expire_leases_job():
    return expire_leases()


# One fit at a time: a fit reads every counted answer, and a second copy (queued by another
# completed reference, or the schedule) would only repeat it.
@app.task(name=WORKER_MODEL_JOB, **JOB_OPTIONS)
def fit_worker_models_job():
    with lease("worker_models", 0) as mine:
        if not mine:
            return None
        from annotation import worker_models  # pandas and crowd-kit: the job's, not every worker's

        worker_models.store_pairwise_skills()
        return decide_by_worker_models()


# Under a lease as well as the tournament's row lock: a second copy waits for nothing and makes nothing.
@app.task(name=NEXT_ROUND_JOB, **JOB_OPTIONS)
def next_battle_round_job(tournament_id):
    with lease("battle_round", tournament_id) as mine:
        if not mine:
            return 0
        return make_next_round(tournament_id=tournament_id)
