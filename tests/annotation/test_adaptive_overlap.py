"""Ask until decided (issue 26): verification stops at two agreeing answers of up to three, a battle
once the posterior for one side passes its threshold; the queue hands out only units that still
need an answer, and nothing is asked twice."""

import pytest
from django.core.exceptions import ValidationError

from annotation.collection import progress, references, verification
from annotation.crowdwork import configs, queue, review, stages
from annotation.crowdwork.stopping import Agreement, BetaPosterior, OneCoinPosterior, answers_to_ask
from annotation.exceptions import AnnotationError
from annotation.models import HumanJudgement, Instance, Reference, Stage, StageConfig, Tournament, WorkUnit
from annotation.preferences.judgements import shown_left_for, submit_pairwise_judgement
from annotation.preferences.tournaments import apply_judgements_per_pair, launch_tournament
from tests.factories import CaptionFactory, InstanceFactory, WorkerFactory, launch
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db

CORRECT = {"is_correct": True}
WRONG = {"is_correct": False, "problem_in_response": True}


def reference_asked_until_decided(adaptive=True, family=None):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE, **({"family": family} if family else {}))
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    launch(instance.family, Stage.VERIFICATION, overlap=3, adaptive=adaptive, agree_to_decide=2)
    reference = references.store_reference(instance=instance, text="Three sheep.", source=Reference.Source.MANUAL)
    return instance, reference


def turn_on_ask_until_decided(family):
    config = StageConfig.objects.get(family=family, stage=Stage.VERIFICATION)
    before = {name: getattr(config, name) for name in configs.APPLIED_FIELDS}
    config.adaptive = True
    config.save()
    return configs.apply_stage_config(config=config, before=before)


def lease(worker=None, stage=Stage.VERIFICATION):
    worker = worker or WorkerFactory()
    return worker, queue.next_assignment(worker=worker, stage=stage)


def verify(answer, worker=None):
    worker, assignment = lease(worker)
    assert assignment is not None, "nothing to verify"
    verification.submit_verification(assignment_id=assignment.pk, worker=worker, **answer)
    return assignment


def unit_of(reference):
    return WorkUnit.objects.get(stage=Stage.VERIFICATION, reference=reference)


def test_two_agreeing_verifications_close_the_unit_at_two():
    instance, reference = reference_asked_until_decided()
    assert unit_of(reference).overlap == 2
    verify(CORRECT)
    verify(CORRECT)
    unit, _ = unit_of(reference), reference.refresh_from_db()
    assert (unit.status, unit.overlap, reference.verdict) == (WorkUnit.Status.DONE, 2, Reference.Verdict.CORRECT)
    assert lease()[1] is None  # a third worker gets no such unit


def test_a_disagreement_opens_a_third_slot_whose_answer_decides():
    instance, reference = reference_asked_until_decided()
    verify(CORRECT)
    verify(WRONG)
    unit, _ = unit_of(reference), reference.refresh_from_db()
    assert (unit.status, unit.overlap, reference.verdict) == (WorkUnit.Status.OPEN, 3, Reference.Verdict.PENDING)
    verify(WRONG)
    unit, _ = unit_of(reference), reference.refresh_from_db()
    assert (unit.status, unit.overlap, reference.verdict) == (WorkUnit.Status.DONE, 3, Reference.Verdict.INCORRECT)
    assert lease()[1] is None


def test_a_rejected_answer_reopens_the_unit_for_the_answers_still_needed():
    instance, reference = reference_asked_until_decided()
    first = verify(CORRECT)
    verify(CORRECT)
    outcome = review.reject_work(assignments=[first], reason="Answered in two seconds.")
    assert (outcome.decisions_reopened, outcome.units_reopened) == (1, 1)
    unit, _ = unit_of(reference), reference.refresh_from_db()
    assert (unit.status, unit.overlap, reference.verdict) == (WorkUnit.Status.OPEN, 2, Reference.Verdict.PENDING)
    verify(WRONG)  # one correct, one wrong: a third is asked
    assert unit_of(reference).overlap == 3
    verify(CORRECT)
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.CORRECT
    assert unit_of(reference).assignments.answered().count() == 3


def test_rejecting_the_odd_answer_out_decides_on_the_two_agreeing_left_without_asking_again():
    instance, reference = reference_asked_until_decided()
    verify(CORRECT)
    odd = verify(WRONG)
    verify(CORRECT)
    review.reject_work(assignments=[odd], reason="Did not look at the image.")
    unit, _ = unit_of(reference), reference.refresh_from_db()
    assert (unit.status, reference.verdict) == (WorkUnit.Status.DONE, Reference.Verdict.CORRECT)
    assert lease()[1] is None


def test_a_lease_held_when_others_decide_gives_way_to_the_next_unit_and_its_submit_is_refused_kindly():
    # Three leases out under a fixed overlap of three; ask until decided is then turned on.
    instance, reference = reference_asked_until_decided(adaptive=False)
    (a, first), (b, second), (late, third) = lease(), lease(), lease()
    turn_on_ask_until_decided(instance.family)
    for worker, assignment in ((a, first), (b, second)):
        verification.submit_verification(assignment_id=assignment.pk, worker=worker, **CORRECT)
    assert unit_of(reference).status == WorkUnit.Status.DONE

    _, other = reference_asked_until_decided(family=instance.family)
    assert queue.next_assignment(worker=late, stage=Stage.VERIFICATION).unit.reference == other
    with pytest.raises(AnnotationError, match="still on this page"):
        verification.submit_verification(assignment_id=third.pk, worker=late, **WRONG)
    assert reference.verifications.count() == 2


def test_turning_ask_until_decided_on_closes_open_units_whose_answers_already_agree():
    instance, reference = reference_asked_until_decided(adaptive=False)
    assert unit_of(reference).overlap == 3
    verify(CORRECT)
    verify(CORRECT)
    applied = turn_on_ask_until_decided(instance.family)
    reference.refresh_from_db()
    assert (applied.units_resized, applied.units_completed, applied.decided) == (1, 1, 1)
    assert reference.verdict == Reference.Verdict.CORRECT


def test_the_sweep_and_a_rerun_make_nothing_more_under_ask_until_decided():
    instance, reference = reference_asked_until_decided()
    verify(CORRECT)
    verify(WRONG)
    for _ in range(2):
        assert stages.create_work_units(family=instance.family, stage=Stage.VERIFICATION) == 0
        assert stages.owed_units(family=instance.family, stage=Stage.VERIFICATION) == []
    assert WorkUnit.objects.filter(stage=Stage.VERIFICATION).count() == 1
    assert unit_of(reference).overlap == 3


def test_ask_until_decided_is_validated():
    config = StageConfig(family=InstanceFactory().family, stage=Stage.VERIFICATION, overlap=5, adaptive=True,
                         agree_to_decide=2)
    with pytest.raises(ValidationError, match="between 2 and 3"):
        config.clean()
    config.stage = Stage.CAPTION
    with pytest.raises(ValidationError, match="verification setting"):
        config.clean()
    with pytest.raises(ValidationError, match="between 0.5 and 1"):
        Tournament(name="t", adaptive=True, posterior_threshold=0.4).clean()
    with pytest.raises(ValidationError, match="between 0.5 and 1"):
        Tournament(name="t", adaptive=True, posterior_threshold=0.9, judgement_accuracy=0.4).clean()


# --- battles ---------------------------------------------------------------------------------------


def battle_asked_until_decided(threshold, maximum, judgement_accuracy=None):
    with_responses(verified_instance(), "llava", "otter")
    tournament = create_tournament(name="Adaptive", include_reference=False, judgements_per_pair=maximum,
                                   adaptive=True, posterior_threshold=threshold,
                                   judgement_accuracy=judgement_accuracy)
    launch_tournament(tournament=tournament)
    return tournament, WorkUnit.objects.get(stage=Stage.PAIRWISE, battle__tournament=tournament)


def judge(tournament, prefer):
    """A worker prefers response `prefer` ("a" or "b") of the only battle, whichever side it is on."""
    worker, assignment = lease(stage=Stage.PAIRWISE)
    if assignment is None:
        return None
    shown_a_left = shown_left_for(assignment=assignment, tournament=tournament) == HumanJudgement.ShownLeft.A
    choice = "left" if shown_a_left == (prefer == "a") else "right"
    return submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice=choice)


def test_a_battle_three_of_three_for_one_side_stops_at_a_threshold_of_point_nine():
    tournament, unit = battle_asked_until_decided(0.9, 7)
    unit.refresh_from_db()
    assert unit.overlap == 3
    for _ in range(3):
        judge(tournament, "a")
    unit.refresh_from_db()
    assert (unit.status, unit.assignments.answered().count()) == (WorkUnit.Status.DONE, 3)
    assert judge(tournament, "a") is None


def test_a_battle_split_two_two_goes_on_to_its_maximum():
    tournament, unit = battle_asked_until_decided(0.9, 6)
    for side in ("a", "b", "a", "b"):
        judge(tournament, side)
    unit.refresh_from_db()
    assert unit.status == WorkUnit.Status.OPEN
    while judge(tournament, "a") is not None:
        pass
    unit.refresh_from_db()
    assert (unit.status, unit.assignments.answered().count()) == (WorkUnit.Status.DONE, 6)


def test_a_battle_whose_judgements_are_right_four_times_in_five_stops_at_a_lead_of_two():
    tournament, unit = battle_asked_until_decided(0.9, 7, judgement_accuracy=0.8)
    unit.refresh_from_db()
    assert unit.overlap == 2
    judge(tournament, "a")
    judge(tournament, "b")
    unit.refresh_from_db()
    assert (unit.status, unit.overlap) == (WorkUnit.Status.OPEN, 4)
    judge(tournament, "a")
    judge(tournament, "a")
    unit.refresh_from_db()
    # A 3-1 lead: odds 4 ** 2 = 16 to 1, a posterior of 0.94.
    assert (unit.status, unit.assignments.answered().count()) == (WorkUnit.Status.DONE, 4)
    assert judge(tournament, "a") is None


def test_stating_how_often_a_judgement_is_right_after_launch_lets_decided_battles_stop():
    tournament, unit = battle_asked_until_decided(0.9, 7)
    judge(tournament, "a")
    judge(tournament, "a")
    tournament.judgement_accuracy = 0.8
    tournament.save()
    assert apply_judgements_per_pair(tournament=tournament) == (1, 1)
    unit.refresh_from_db()
    assert (unit.status, unit.overlap) == (WorkUnit.Status.DONE, 2)


def test_raising_a_battles_threshold_after_launch_asks_its_open_battles_for_more():
    tournament, unit = battle_asked_until_decided(0.9, 7)
    judge(tournament, "a")
    tournament.posterior_threshold = 0.95
    tournament.save()
    assert apply_judgements_per_pair(tournament=tournament) == (1, 0)
    unit.refresh_from_db()
    assert unit.overlap == 4


def test_the_fewest_answers_that_could_decide():
    two_of_three = Agreement(2)
    assert [answers_to_ask(two_of_three, answers, 3) for answers in ([], [True], [True, False], [True, True])] \
        == [2, 2, 3, 2]
    # Uniform prior: n unanimous judgements give P(A preferred) = 1 - 0.5 ** (n + 1).
    assert answers_to_ask(BetaPosterior(0.9), [], 9) == 3
    assert answers_to_ask(BetaPosterior(0.95), [], 9) == 4
    assert answers_to_ask(BetaPosterior(0.9), ["model_a", "model_b"], 9) == 6
    # One-coin at 0.8: a lead of n gives odds 4 ** n, so a lead of two passes 0.9 and of three 0.95.
    assert answers_to_ask(OneCoinPosterior(0.9, 0.8), [], 9) == 2
    assert answers_to_ask(OneCoinPosterior(0.95, 0.8), [], 9) == 3
    assert answers_to_ask(OneCoinPosterior(0.9, 0.8), ["model_a", "model_b"], 9) == 4
    assert answers_to_ask(OneCoinPosterior(0.9, 0.8), ["model_a", "model_b", "model_b"], 4) == 4


def test_the_workflow_counts_answers_bought_against_the_fixed_overlap():
    instance, reference = reference_asked_until_decided()
    verify(CORRECT)
    verify(CORRECT)
    bought = progress.answers_bought(family=instance.family, stage=Stage.VERIFICATION)
    assert (bought.answers, bought.fixed_overlap_answers) == (2, 3)


def test_the_tournament_form_offers_how_often_a_judgement_is_right(admin_client):
    from django.urls import reverse

    page = admin_client.get(reverse("admin:annotation_tournament_add")).content.decode()
    assert 'name="judgement_accuracy"' in page
    assert "a lead of two judgements passes 0.9 at 0.8" in page


def test_a_changed_rule_is_told_without_a_count_of_nothing_when_no_reference_waits():
    assert configs.Applied(rule_changed=True).message() == (
        "References will be decided by the new rule as their answers come in; those decided already keep their "
        "decision.")
    assert configs.Applied(rule_changed=True, pending_decisions=2).message().startswith(
        "2 reference(s) still undecided will be decided by the new rule")


def changed(config, **settings):
    before = {name: getattr(config, name) for name in configs.APPLIED_FIELDS}
    for name, value in settings.items():
        setattr(config, name, value)
    config.save()
    return configs.apply_stage_config(config=config, before=before)


def test_a_worker_models_minimum_answers_asks_nothing_again_where_no_weighed_rule_reads_it(monkeypatch):
    """A fixed overlap under Dawid-Skene reads `model_min_answers` in its job alone: its open units
    keep what they ask, and the researcher is told the model is fitted again, whose own decisions
    may be revised, never that every decision stands."""
    monkeypatch.setattr(configs, "enqueue", lambda job: None)  # the job's own tests run it
    instance, reference = reference_asked_until_decided(adaptive=False)
    config = StageConfig.objects.get(family=instance.family, stage=Stage.VERIFICATION)
    StageConfig.objects.filter(pk=config.pk).update(aggregation="dawid_skene", overlap=3)
    config.refresh_from_db()
    WorkUnit.objects.filter(reference=reference).update(overlap=2)  # as an overlap left by an earlier rule

    applied = changed(config, model_min_answers=8)
    assert (applied.rule_changed, applied.units_resized, applied.refitted) == (False, 0, True)
    assert WorkUnit.objects.get(reference=reference).overlap == 2
    assert "keep their decision" not in applied.message()
    assert applied.message().startswith("The worker model is fitted again, and a decision of its own that the new "
                                        "fit disagrees with is revised where nothing published rests on it")

    weighed = changed(config, adaptive=True, stopping=StageConfig.Stopping.WORKER_ACCURACY)
    assert weighed.rule_changed
    assert changed(config, model_min_answers=9).rule_changed  # the weighed rule reads it: asked again
