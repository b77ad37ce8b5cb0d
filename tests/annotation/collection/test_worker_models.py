"""Worker models decide verification (crowd-kit's Dawid-Skene, GLAD, MACE): a simulated crowd
answers through the real queue and submit service on PostgreSQL; the worker-model job's service
fits and decides."""

import random
from collections import Counter

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation import worker_models
from annotation.collection import references, verification, worker_model_job
from annotation.collection.progress import format_table2, table2
from annotation.crowdwork import configs, queue, review
from annotation.models import (
    Aggregation,
    Assignment,
    Instance,
    LabelShare,
    Reference,
    Stage,
    Verification,
    WorkerReliability,
    WorkUnit,
)
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, WorkerFactory, launch

pytestmark = pytest.mark.django_db

SEED = 26
GOOD_ACCURACY = 0.9


def candidates(family, count):
    """`count` candidate references of `family`, each with its verification unit."""
    units = []
    for _ in range(count):
        instance = InstanceFactory(family=family, status=Instance.Status.AWAITING_REFERENCE, image_count=1)
        instance.current_caption = CaptionFactory(instance=instance)
        instance.save()
        reference = references.store_reference(instance=instance, text="Two cups.", source=Reference.Source.MANUAL)
        units.append(WorkUnit.objects.get(reference=reference, stage=Stage.VERIFICATION))
    return units


def answer(unit, worker, is_correct):
    lease = queue.lease_unit(worker=worker, unit=unit)
    verification.submit_verification(assignment_id=lease.pk, worker=worker, is_correct=is_correct,
                                     problem_in_response=not is_correct)
    return lease


def crowd_answers(units, *, good, spammers, rng, overlap=3, submit=answer):
    """Each unit answered by `overlap` workers drawn at random; good workers are right with
    GOOD_ACCURACY, spammers say "correct" whatever the truth. Returns the truth per reference."""
    truth = {}
    workers = good + spammers
    for unit in units:
        truth[unit.reference_id] = rng.random() < 0.5
        for worker in rng.sample(workers, overlap):
            if worker in spammers:
                said = True
            else:
                said = truth[unit.reference_id] if rng.random() < GOOD_ACCURACY else not truth[unit.reference_id]
            submit(unit, worker, said)
    return truth


def stored_answer(unit, worker, is_correct):
    """A submitted, provisional answer stored as the submit service leaves it, without its
    queue round trips (the fit reads rows; the service's path is tested in the last test)."""
    lease = Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                      lease_expires_at=timezone.now(), submitted_at=timezone.now())
    Verification.objects.create(reference_id=unit.reference_id, worker=worker, assignment=lease,
                                is_correct=is_correct, problem_in_response=not is_correct)


@pytest.fixture
def spammed_crowd():
    """60 references of a Dawid-Skene family, answered three times each by ten workers of whom
    four (40%) always say "correct", seeded."""
    rng = random.Random(SEED)
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=3, aggregation=Aggregation.DAWID_SKENE,
           verification_rule="majority")
    good, spammers = WorkerFactory.create_batch(6), WorkerFactory.create_batch(4)
    units = candidates(family, 60)
    truth = crowd_answers(units, good=good, spammers=spammers, rng=rng, submit=stored_answer)
    return truth, good, spammers


def accuracy(decisions, truth):
    return sum(decisions[pk] == truth[pk] for pk in truth) / len(truth)


def test_references_under_a_worker_model_wait_for_the_job(spammed_crowd):
    truth, _, _ = spammed_crowd
    assert Reference.objects.filter(pk__in=truth, verdict=Reference.Verdict.PENDING).count() == len(truth)
    assert len(worker_model_job.awaiting_worker_model()) == len(truth)


def test_dawid_skene_beats_the_majority_against_the_truth_with_forty_percent_spammers(spammed_crowd):
    truth, _, _ = spammed_crowd
    majority = {}
    for reference in Reference.objects.filter(pk__in=truth).prefetch_related("verifications"):
        votes = [vote.is_correct for vote in reference.verifications.all()]
        majority[reference.pk] = sum(votes) * 2 > len(votes)

    assert worker_model_job.decide_by_worker_models() == len(truth)

    decided = dict(Reference.objects.filter(pk__in=truth).values_list("pk", "verdict"))
    model = {pk: verdict == Reference.Verdict.CORRECT for pk, verdict in decided.items()}
    assert accuracy(model, truth) > accuracy(majority, truth)
    # Where the model's posterior is below the stage's minimum (0.6), the verification rule decided.
    deciders = Counter(Reference.objects.filter(pk__in=truth).values_list("decided_by", flat=True))
    assert set(deciders) == {"dawid_skene", "votes"} and deciders["dawid_skene"] > deciders["votes"]


def test_stored_reliabilities_rank_spammers_below_good_workers(spammed_crowd):
    _, good, spammers = spammed_crowd
    worker_model_job.decide_by_worker_models()
    stored = dict(WorkerReliability.objects.filter(stage=Stage.VERIFICATION, model="dawid_skene", family=None)
                  .values_list("worker_id", "reliability"))
    assert max(stored[worker.pk] for worker in spammers) < min(stored[worker.pk] for worker in good)


def test_the_job_stores_each_workers_accuracy_on_either_verdict_and_how_common_each_is(spammed_crowd):
    """Spammers say "correct" whatever the truth: right on every sound reference, never on a flawed
    one; a worker-aware stage weighs their "correct" by that (annotation/workforce/accuracy.py)."""
    truth, good, spammers = spammed_crowd
    worker_model_job.decide_by_worker_models()
    stored = {row.worker_id: row for row in WorkerReliability.objects.filter(
        stage=Stage.VERIFICATION, model="dawid_skene", family=None)}
    shares = dict(LabelShare.objects.filter(stage=Stage.VERIFICATION, model="dawid_skene", family=None)
                  .values_list("label", "share"))
    assert set(shares) == {"correct", "incorrect"} and sum(shares.values()) == pytest.approx(1)
    # The spammers' "correct" weighs less in the fit than in the answers' own count.
    sound = sum(truth.values()) / len(truth)
    said = Verification.objects.filter(reference__in=truth, is_correct=True).count() / (3 * len(truth))
    assert sound < shares["correct"] < said
    for spammer in spammers:
        on = stored[spammer.pk].by_truth
        assert on["correct"] > 0.9 and on["incorrect"] < 0.1
        assert stored[spammer.pk].reliability == pytest.approx(
            on["correct"] * shares["correct"] + on["incorrect"] * shares["incorrect"])
    assert all(min(stored[worker.pk].by_truth.values()) > 0.5 for worker in good)


def test_the_job_decides_each_reference_once(spammed_crowd):
    truth, _, _ = spammed_crowd
    assert worker_model_job.decide_by_worker_models() == len(truth)
    before = list(Reference.objects.filter(pk__in=truth).values_list("pk", "verdict", "posterior", "decided_at"))
    assert worker_model_job.decide_by_worker_models() == 0
    assert list(Reference.objects.filter(pk__in=truth).values_list("pk", "verdict", "posterior",
                                                                     "decided_at")) == before


def test_a_rejected_answer_changes_nothing_in_the_fit():
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=2, aggregation=Aggregation.DAWID_SKENE)
    first, second, careless = WorkerFactory.create_batch(3)
    units = candidates(family, 4)
    for unit, said in zip(units, [True, False, True, False], strict=True):
        answer(unit, first, said)
        answer(unit, second, said)
    before = worker_models.verification_frame()
    extra = candidates(family, 1)[0]
    lease = answer(extra, careless, False)
    review.reject_work(assignments=[lease], reason="Answered without looking.")

    assert worker_models.verification_frame().equals(before)
    worker_model_job.decide_by_worker_models()
    assert not WorkerReliability.objects.filter(worker=careless).exists()


def test_the_stages_aggregation_changes_the_decision_and_the_pages_say_which(admin_client):
    """Two spammers say "correct", a good worker says "incorrect": the majority accepts the
    reference; Dawid-Skene, having seen the spammers say "correct" where the good workers did not,
    rejects the same answers."""
    rng = random.Random(SEED)
    by_votes, by_model = FamilyFactory(), FamilyFactory()
    launch(by_votes, Stage.VERIFICATION, overlap=3, verification_rule="majority")
    launch(by_model, Stage.VERIFICATION, overlap=3, verification_rule="majority",
           aggregation=Aggregation.DAWID_SKENE)
    good, spammers = WorkerFactory.create_batch(3), WorkerFactory.create_batch(2)
    crowd_answers(candidates(by_model, 20), good=good, spammers=spammers, rng=rng)
    disputed = {}
    for family in (by_votes, by_model):
        unit = candidates(family, 1)[0]
        for spammer in spammers:
            answer(unit, spammer, True)
        answer(unit, good[0], False)
        disputed[family] = Reference.objects.get(pk=unit.reference_id)

    worker_model_job.decide_by_worker_models()

    voted, modelled = (Reference.objects.get(pk=disputed[family].pk) for family in (by_votes, by_model))
    assert (voted.verdict, voted.decided_by) == (Reference.Verdict.CORRECT, "votes")
    assert (modelled.verdict, modelled.decided_by) == (Reference.Verdict.INCORRECT, "dawid_skene")
    page = admin_client.get(reverse("admin:annotation_reference_change", args=[modelled.pk]))
    assert f"Dawid-Skene (posterior {modelled.posterior:.2f})" in page.content.decode()
    listing = admin_client.get(reverse("admin:annotation_reference_changelist"), {"decided_by": "dawid_skene"})
    assert f"Dawid-Skene (posterior {modelled.posterior:.2f})" in listing.content.decode()
    report = admin_client.get(reverse("admin:annotation_instructionfamily_table2"), {"family": by_model.pk})
    assert "Decided by: Dawid-Skene 21." in report.content.decode()
    assert "Decided by: Votes (the verification rule) 1" in format_table2(table2(family=by_votes))


def test_waiting_references_are_owed_work_the_sweep_queues_again(spammed_crowd):
    from tasks.outbox import owed_jobs

    assert verification.WORKER_MODEL_JOB in [name for name, *_ in owed_jobs()]
    worker_model_job.decide_by_worker_models()
    assert verification.WORKER_MODEL_JOB not in [name for name, *_ in owed_jobs()]


def test_going_back_to_votes_decides_the_references_waiting_for_a_model():
    family = FamilyFactory()
    config = launch(family, Stage.VERIFICATION, overlap=2, aggregation=Aggregation.MACE)
    unit = candidates(family, 1)[0]
    for worker in WorkerFactory.create_batch(2):
        answer(unit, worker, True)
    assert Reference.objects.get(pk=unit.reference_id).verdict == Reference.Verdict.PENDING

    config.aggregation = Aggregation.VOTES
    config.save()
    applied = configs.apply_stage_config(config=config, before={**config.__dict__, "aggregation": "mace"})

    reference = Reference.objects.get(pk=unit.reference_id)
    assert (reference.verdict, reference.decided_by) == (Reference.Verdict.CORRECT, "votes")
    assert applied.decided == 1 and "decided by Votes" in applied.message()


def test_the_stage_settings_offer_the_worker_models_and_a_refit(admin_client):
    config = launch(FamilyFactory(), Stage.VERIFICATION)
    form = admin_client.get(reverse("admin:annotation_stageconfig_change", args=[config.pk])).content.decode()
    assert 'name="aggregation"' in form and "Dawid-Skene worker model (crowd-kit)" in form

    done = admin_client.post(reverse("admin:annotation_stageconfig_changelist"),
                             {"action": "refit_worker_models", "_selected_action": [config.pk]}, follow=True)
    assert "The worker models are being refitted" in done.content.decode()


def decisions_and_instances(pks):
    references = list(Reference.objects.filter(pk__in=pks).order_by("pk").values_list(
        "pk", "verdict", "decided_by", "posterior", "problem_in_caption", "problem_in_response", "held_for_review"))
    instances = list(Instance.objects.filter(references__pk__in=pks).order_by("pk")
                     .values_list("pk", "status", "reference_output"))
    units = list(WorkUnit.objects.filter(reference_id__in=pks).order_by("pk").values_list("pk", "status"))
    return references, instances, units


def test_the_job_decides_in_bulk_what_it_decided_one_by_one_in_a_few_statements(spammed_crowd):
    truth, _, _ = spammed_crowd
    fits = {Aggregation.DAWID_SKENE: worker_models.fit_labels(worker_models.verification_frame(),
                                                              Aggregation.DAWID_SKENE)}
    known = worker_model_job.workers_of_known_accuracy()
    with transaction.atomic():
        for waiting in worker_model_job.awaiting_worker_model():
            worker_model_job.decide_one(waiting, fits, known)
        one_by_one = decisions_and_instances(truth)
        transaction.set_rollback(True)
    assert decisions_and_instances(truth) != one_by_one

    with CaptureQueriesContext(connection) as statements:
        assert worker_model_job.decide_waiting(fits, known) == len(truth)

    assert decisions_and_instances(truth) == one_by_one
    # Reading what waits, locking, reading the votes, and one bulk update per table: a few statements
    # for 60 references, where deciding them one by one took about 25 each.
    assert len(statements) < len(truth) / 2
