"""What the benchmark holds and what every item waits for (issue 36), through the real services on
PostgreSQL: a model decides only on evidence and says when it disagrees with the people, nothing is
left without a next step, and `check_benchmark` finds every violation injected through the ORM."""

import random

import pandas as pd
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from annotation.benchmark_check import violations
from annotation.collection import references, verification, worker_model_job
from annotation.collection.waiting import Waits, settle_family, waits_for
from annotation.crowdwork import configs, review
from annotation.models import (
    Aggregation,
    Assignment,
    DecisionChange,
    Instance,
    Reference,
    Snapshot,
    Stage,
    StageConfig,
    WorkState,
    WorkUnit,
)
from annotation.worker_models import LabelFit
from tests.annotation.collection.test_worker_models import answer, candidates, crowd_answers, stored_answer
from tests.factories import FamilyFactory, WorkerFactory, launch

pytestmark = pytest.mark.django_db


def _fit(reference_id, label, posterior, answers):
    """A fit's result as crowd-kit's models leave it (annotation.worker_models.fit_labels)."""
    return LabelFit(model=Aggregation.DAWID_SKENE, labels=pd.Series({reference_id: label}),
                    posteriors=pd.Series({reference_id: posterior}), reliability=pd.Series(dtype=float),
                    answers=pd.Series(answers))


def _config(**fields):
    return StageConfig(stage=Stage.VERIFICATION, aggregation=Aggregation.DAWID_SKENE, **fields)


def test_a_model_label_against_every_counted_vote_is_held_for_a_reviewer_whatever_its_evidence():
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=2, aggregation=Aggregation.DAWID_SKENE)
    unit = candidates(family, 1)[0]
    first, second = WorkerFactory.create_batch(2)
    answer(unit, first, False)
    answer(unit, second, False)
    votes = verification.counted_votes(unit.reference, _config())
    # The case: Dawid-Skene said "correct" at 0.63 against two "incorrect" votes.
    fit = _fit(unit.reference_id, "correct", 0.63, {first.pk: 50, second.pk: 50})

    decision = worker_model_job.model_decision(fit=fit, votes=votes, config=_config(model_min_answers=1,
                                                                               model_min_posterior=0.5))

    assert decision.held.startswith("Dawid-Skene says correct (posterior 0.63) where every counted vote (2)")
    assert decision.is_correct is None


@pytest.mark.parametrize(("answers", "posterior", "decides"), [
    ({"first": 2, "second": 9}, 0.95, Aggregation.VOTES),  # one verifier's answers are too few
    ({"first": 9, "second": 9}, 0.55, Aggregation.VOTES),  # the posterior is below the stage's minimum
    ({"first": 9, "second": 9}, 0.95, Aggregation.DAWID_SKENE),
])
def test_a_model_decides_only_when_each_verifier_has_enough_answers_and_its_posterior_is_high_enough(
        answers, posterior, decides):
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=2, aggregation=Aggregation.DAWID_SKENE)
    unit = candidates(family, 1)[0]
    workers = dict(zip(("first", "second"), WorkerFactory.create_batch(2), strict=True))
    answer(unit, workers["first"], True)
    answer(unit, workers["second"], False)
    votes = verification.counted_votes(unit.reference, _config())
    fit = _fit(unit.reference_id, "incorrect", posterior, {workers[name].pk: n for name, n in answers.items()})

    decision = worker_model_job.model_decision(fit=fit, votes=votes, config=_config(model_min_answers=5,
                                                                               model_min_posterior=0.6))

    assert (decision.by, decision.held) == (decides, "")


def test_a_worker_whose_gold_accuracy_is_known_needs_no_minimum_of_answers():
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=2, aggregation=Aggregation.DAWID_SKENE)
    unit = candidates(family, 1)[0]
    first, second = WorkerFactory.create_batch(2)
    answer(unit, first, True)
    answer(unit, second, False)
    votes = verification.counted_votes(unit.reference, _config())
    fit = _fit(unit.reference_id, "incorrect", 0.9, {first.pk: 1, second.pk: 1})

    decision = worker_model_job.model_decision(fit=fit, votes=votes, config=_config(model_min_answers=5),
                                           known_accuracy=frozenset({first.pk, second.pk}))

    assert decision.by == Aggregation.DAWID_SKENE


def test_rejecting_the_spammer_under_ask_until_decided_leaves_the_reference_to_the_next_fit():
    """The issue's three references that waited forever: two agreeing counted votes after the
    spammer's was rejected, a unit that asked three, and a job that looked for three."""
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=3, adaptive=True, agree_to_decide=2,
           aggregation=Aggregation.DAWID_SKENE)
    unit = candidates(family, 1)[0]
    spammer, first, second = WorkerFactory.create_batch(3)
    spam = answer(unit, spammer, True)
    answer(unit, first, False)
    answer(unit, second, False)
    worker_model_job.decide_by_worker_models()
    unit.reference.refresh_from_db()
    decided_before = unit.reference.verdict

    outcome = review.reject_work(assignments=[spam], reason="Says correct to everything.")

    reference = Reference.objects.get(pk=unit.reference_id)
    if decided_before != Reference.Verdict.PENDING:
        assert outcome.decisions_reopened == 1
    assert waits_for(family).instances[reference.instance_id] == Waits.WORKER_MODEL
    assert worker_model_job.decide_by_worker_models() == 1
    reference.refresh_from_db()
    # Two verifiers with one answer each are thin evidence: the rule decides from their votes.
    assert (reference.verdict, reference.decided_by) == (Reference.Verdict.INCORRECT, Aggregation.VOTES)
    assert violations(families=family.__class__.objects.filter(pk=family.pk)) == []


def test_counting_provisional_answers_again_decides_references_whose_units_are_done():
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=2, counts_provisional=False)
    unit = candidates(family, 1)[0]
    for worker in WorkerFactory.create_batch(2):
        answer(unit, worker, True)
    assert WorkUnit.objects.get(pk=unit.pk).status == WorkUnit.Status.DONE
    assert waits_for(family).instances[unit.reference.instance_id] == Waits.REVIEWER

    config = StageConfig.objects.get(family=family, stage=Stage.VERIFICATION)
    config.counts_provisional = True
    config.save()
    applied = configs.apply_stage_config(config=config, before={**{name: getattr(config, name) for name in
                                                                    configs.APPLIED_FIELDS},
                                                                 "counts_provisional": False})

    assert applied.decided == 1
    assert Instance.objects.get(pk=unit.reference.instance_id).status == Instance.Status.VERIFIED


def test_a_raised_target_makes_its_instruction_tasks_and_is_a_violation_until_it_does():
    family = FamilyFactory(target_instances=2)
    launch(family, Stage.INSTRUCTION_GENERATION)
    settle_family(family)
    assert WorkUnit.objects.filter(family=family, stage=Stage.INSTRUCTION_GENERATION).count() == 2

    family.target_instances = 5
    family.save()
    assert waits_for(family).slots_missing == 3
    assert any("asks for 3 more instance(s)" in v.what for v in violations(families=_only(family)))

    assert settle_family(family).units_made == 3
    assert violations(families=_only(family)) == []
    assert settle_family(family).units_made == 0


def _only(family):
    return family.__class__.objects.filter(pk=family.pk)


@pytest.fixture
def decided_by_dawid_skene():
    """60 references of a Dawid-Skene family answered by six good workers and four spammers, decided
    by the job with the stage's defaults."""
    rng = random.Random(26)
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=3, aggregation=Aggregation.DAWID_SKENE, verification_rule="majority")
    units = candidates(family, 60)
    crowd_answers(units, good=WorkerFactory.create_batch(6), spammers=WorkerFactory.create_batch(4), rng=rng,
                  submit=stored_answer)
    worker_model_job.decide_by_worker_models()
    return family


def test_a_refit_that_decides_otherwise_revises_what_no_snapshot_published_and_records_each_change(
        decided_by_dawid_skene):
    family = decided_by_dawid_skene
    by_model = Reference.objects.filter(instance__family=family, decided_by=Aggregation.DAWID_SKENE)
    config = StageConfig.objects.get(family=family, stage=Stage.VERIFICATION)
    majority = {reference.pk: verification.counted_votes(reference, config) for reference in by_model}
    majority = {pk: sum(vote.is_correct for vote in votes) * 2 > len(votes) for pk, votes in majority.items()}
    disagreeing = [r for r in by_model if (r.verdict == Reference.Verdict.CORRECT) != majority[r.pk]]
    assert len(disagreeing) >= 2
    published, revisable = disagreeing[0], disagreeing[1:]
    Snapshot.objects.create(version=900, status=Snapshot.Status.DONE,
                            instance_digests={str(published.instance_id): "sha"})
    before = {r.pk: r.verdict for r in disagreeing}

    # The researcher asks more of the model's evidence than any posterior gives: the rule decides.
    StageConfig.objects.filter(pk=config.pk).update(model_min_posterior=1.01)
    worker_model_job.decide_by_worker_models()

    changes = {change.reference_id: change for change in DecisionChange.objects.filter(
        reference__instance__family=family)}
    assert published.pk not in changes
    assert Reference.objects.get(pk=published.pk).verdict == before[published.pk]
    assert set(changes) == {r.pk for r in revisable}
    for reference in revisable:
        change = changes[reference.pk]
        assert change.before == before[reference.pk]
        now = Reference.objects.get(pk=reference.pk)
        if change.applied:
            assert (now.verdict, now.decided_by) == (change.after, Aggregation.VOTES)
        else:
            assert now.verdict == before[reference.pk] and "stands" in change.note
    assert worker_model_job.decide_by_worker_models() == 0
    assert DecisionChange.objects.filter(reference__instance__family=family).count() == len(changes)


def test_check_benchmark_names_each_violation_injected_through_the_orm(decided_by_dawid_skene, capsys):
    family = decided_by_dawid_skene
    call_command("check_benchmark", "--family", str(family.pk))
    assert "no violation" in capsys.readouterr().out

    config = StageConfig.objects.get(family=family, stage=Stage.VERIFICATION)
    # A model decision against every counted vote, with no reviewer told.
    against = next(r for r in Reference.objects.filter(instance__family=family, verdict=Reference.Verdict.CORRECT)
                   if any(vote.is_correct for vote in verification.counted_votes(r, config)))
    against.verifications.update(is_correct=False, problem_in_response=True)
    # A verified instance whose caption was rejected behind the services' back.
    verified = Instance.objects.filter(family=family, status=Instance.Status.VERIFIED).exclude(
        pk=against.instance_id).first()
    caption_lease = Assignment.objects.create(
        unit=WorkUnit.objects.create(stage=Stage.CAPTION, key=f"injected-{verified.pk}", family=family,
                                     instance=verified, status=WorkUnit.Status.DONE),
        worker=WorkerFactory(), status=Assignment.Status.SUBMITTED, work_state=WorkState.REJECTED,
        lease_expires_at=timezone.now())
    verified.current_caption.assignment = caption_lease
    verified.current_caption.save()
    # A reference left pending with its unit done and every vote in: nothing will decide it.
    stuck = Reference.objects.filter(instance__family=family).exclude(
        instance_id__in=[against.instance_id, verified.pk]).first()
    Reference.objects.filter(pk=stuck.pk).update(verdict=Reference.Verdict.PENDING, decided_by="", posterior=None)
    Instance.objects.filter(pk=stuck.instance_id).update(status=Instance.Status.AWAITING_VERIFICATION)
    StageConfig.objects.filter(pk=config.pk).update(aggregation=Aggregation.VOTES)

    with pytest.raises(CommandError) as failed:
        call_command("check_benchmark", "--family", str(family.pk))
    out = capsys.readouterr().out
    assert failed.value.returncode == 1
    assert f"instance #{against.instance_id}: reference #{against.pk} was decided correct by Dawid-Skene " \
           "against every counted vote (3), with no reviewer" in out
    assert f"instance #{verified.pk}: verified on caption #{verified.current_caption.pk}, which was rejected" in out
    assert f"instance #{stuck.instance_id}: undecided, and nothing anyone or any job will do moves it" in out


def test_a_reference_pasted_for_an_instance_under_review_keeps_it_waiting_for_a_reviewer():
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=2, aggregation=Aggregation.DAWID_SKENE)
    unit = candidates(family, 1)[0]
    Reference.objects.filter(pk=unit.reference_id).update(held_for_review="Dawid-Skene says correct ...")
    references.add_manual_reference(instance=unit.reference.instance, text="Another answer.", user=None)
    assert waits_for(family).instances[unit.reference.instance_id] == Waits.TASK
    WorkUnit.objects.filter(family=family).update(status=WorkUnit.Status.CANCELLED)
    assert waits_for(family).instances[unit.reference.instance_id] == Waits.REVIEWER
