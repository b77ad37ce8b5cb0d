"""The worker-model job decides in bulk exactly as deciding each reference alone (issue 41): on a
random history of families, settings and answers, through the real services on PostgreSQL, the
same decisions, instances, units and announced jobs; and its statements do not grow with the
references it decides."""

import inspect
import random

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation import worker_models
from annotation.collection import references, worker_model_job
from annotation.models import (
    Aggregation,
    Assignment,
    Battle,
    Instance,
    ModelResponse,
    Reference,
    Stage,
    Verification,
    WorkState,
    WorkUnit,
)
from tests.annotation.collection.test_worker_models import candidates
from tests.factories import FamilyFactory, WorkerFactory, launch
from tests.scoring_factories import create_tournament

pytestmark = pytest.mark.django_db

SEED = 41


def store_answer(unit, worker, is_correct, *, problem_in_caption=False, work_state=WorkState.PROVISIONAL):
    """A submitted answer as the submit service leaves it (or as a review left it: `work_state`)."""
    lease = Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                      lease_expires_at=timezone.now(), submitted_at=timezone.now(),
                                      work_state=work_state)
    Verification.objects.create(reference_id=unit.reference_id, worker=worker, assignment=lease,
                                is_correct=is_correct, problem_in_caption=not is_correct and problem_in_caption,
                                problem_in_response=not is_correct and not problem_in_caption)


def random_history(rng, *, per_family=14):
    """Two Dawid-Skene families (three verifiers and a new caption for a wrong one; ask until two
    agree and discard a wrong one), some instances with a second candidate or a human-written
    reference, battles on some, and answers by good workers, spammers and contrary workers, blaming
    the caption or the response, newcomers, some answers rejected, some units short of answers."""
    recaption = FamilyFactory(target_instances=60)
    launch(recaption, Stage.VERIFICATION, overlap=3, aggregation=Aggregation.DAWID_SKENE, verification_rule="majority",
           on_incorrect="recaption", model_min_answers=4)
    adaptive = FamilyFactory(target_instances=60)
    launch(adaptive, Stage.VERIFICATION, overlap=3, adaptive=True, agree_to_decide=2,
           aggregation=Aggregation.DAWID_SKENE, model_min_answers=1, model_min_posterior=0.7)
    for family in (recaption, adaptive):
        launch(family, Stage.INSTRUCTION_GENERATION)
    units = candidates(recaption, per_family) + candidates(adaptive, per_family)
    for unit in rng.sample(units, 4):
        second = references.store_reference(instance=unit.instance, text="A second candidate.",
                                            source=Reference.Source.MANUAL)
        units.append(WorkUnit.objects.get(reference=second, stage=Stage.VERIFICATION))
    for unit in rng.sample(units, 3):
        Instance.objects.filter(pk=unit.instance_id).update(reference_output="Written by a person.")
    tournament = create_tournament(name="Bulk", sample=False, include_reference=False)
    for unit in rng.sample(units, 6):
        a, b = (ModelResponse.objects.create(instance_id=unit.instance_id, model_name=name, text=f"{name} says so.")
                for name in ("model-a", "model-b"))
        Battle.objects.create(tournament=tournament, instance_id=unit.instance_id, response_a=a, response_b=b)
    good, spammers, contrary = (WorkerFactory.create_batch(count) for count in (6, 2, 2))
    # Units only the two contrary workers answer: a model that learnt they say the opposite of the
    # others contradicts both their votes.
    alone_with_contrary = set(rng.sample(range(per_family, 2 * per_family), 3))
    for index, unit in enumerate(units):
        truth = rng.random() < 0.5
        voters = contrary if index in alone_with_contrary else rng.sample(good + spammers + contrary,
                                                                          rng.choice([2, 3, 3, 3]))
        for worker in voters:
            if worker in spammers:
                said = True
            elif worker in contrary:
                said = not truth
            else:
                said = truth if rng.random() < 0.85 else not truth
            rejected = rng.random() < 0.05
            store_answer(unit, worker, said, problem_in_caption=rng.random() < 0.8,
                         work_state=WorkState.REJECTED if rejected else WorkState.PROVISIONAL)
    # Newcomers with one answer each: the model's evidence on their units is thin, the votes decide.
    for unit in rng.sample(units[:per_family], 3):
        store_answer(unit, WorkerFactory(), rng.random() < 0.5)


def outcome():
    """Everything deciding changes, in an order that does not depend on new rows' ids."""
    decisions = list(Reference.objects.order_by("pk").values_list(
        "pk", "verdict", "decided_by", "posterior", "problem_in_caption", "problem_in_response", "flagged_harmful",
        "held_for_review"))
    instances = list(Instance.objects.order_by("pk").values_list(
        "pk", "status", "reference_output", "caption_round", "current_caption_id"))
    units = sorted(WorkUnit.objects.values_list("stage", "key", "status", "instance_id", "reference_id", "overlap"),
                   key=repr)
    return decisions, instances, units


def announced(callbacks):
    """The jobs sent once the transaction commits (crowdbench.jobs.enqueue): (name, args)."""
    sent = [inspect.getclosurevars(callback).nonlocals for callback in callbacks]
    return {(job["name"], tuple(job["args"])) for job in sent if "name" in job}


def test_the_job_decides_a_random_history_in_bulk_as_deciding_each_reference_alone_does(
        django_capture_on_commit_callbacks):
    random_history(random.Random(SEED))
    fits = {Aggregation.DAWID_SKENE: worker_models.fit_labels(worker_models.verification_frame(),
                                                              Aggregation.DAWID_SKENE)}
    known = worker_model_job.workers_of_known_accuracy()
    before = outcome()
    with transaction.atomic():
        with django_capture_on_commit_callbacks() as callbacks:
            for waiting in worker_model_job.awaiting_worker_model():
                worker_model_job.decide_one(waiting, fits, known)
        alone, alone_jobs = outcome(), announced(callbacks)
        transaction.set_rollback(True)
    assert outcome() == before

    with django_capture_on_commit_callbacks() as callbacks:
        worker_model_job.decide_waiting(fits, known)

    assert outcome() == alone
    assert announced(callbacks) == alone_jobs
    # The history reaches every way a reference is decided or left, so the equality means something.
    decisions, instances, _ = alone
    assert {(verdict, by) for _, verdict, by, *_ in decisions} >= {
        ("correct", "dawid_skene"), ("incorrect", "dawid_skene"), ("pending", "")}
    assert {verdict for _, verdict, by, *_ in decisions if by == "votes"}
    assert any(held for *_, held in decisions)
    assert {status for _, status, *_ in instances} >= {"verified", "discarded", "awaiting_caption",
                                                       "awaiting_verification"}
    assert {name for name, _ in alone_jobs} == {"tasks.refresh_leaderboard"}


def statements_to_decide(count):
    """The statements of one run of the job deciding `count` references (half of them correct) of
    a family nothing else waits in, answered alike by the same six workers; the rows are rolled
    back."""
    with transaction.atomic():
        family = FamilyFactory(target_instances=count)
        launch(family, Stage.VERIFICATION, overlap=3, aggregation=Aggregation.DAWID_SKENE,
               verification_rule="majority", model_min_answers=1)
        workers = WorkerFactory.create_batch(6)
        for index, unit in enumerate(candidates(family, count)):
            for position, worker in enumerate(workers[index % 2::2]):
                store_answer(unit, worker, index % 2 == 0 if position < 2 else index % 2 == 1)
        with CaptureQueriesContext(connection) as statements:
            decided = worker_model_job.decide_by_worker_models()
        verdicts = set(Reference.objects.filter(instance__family=family).values_list("verdict", flat=True))
        transaction.set_rollback(True)
    assert decided == count
    assert verdicts == {Reference.Verdict.CORRECT, Reference.Verdict.INCORRECT}
    return len(statements)


def test_the_jobs_statements_do_not_grow_with_the_references_it_decides():
    assert statements_to_decide(30) == statements_to_decide(6)
