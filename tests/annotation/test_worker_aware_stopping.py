"""Worker-aware ask until decided (issue 41): a verification stage weighs each answer by its
verifier's accuracy (gold, else the worker model, else a stated prior) and stops once the verdict's
posterior passes its threshold, so a good verifier's answer decides alone and poor verifiers' items
are asked more, up to the overlap."""

import math

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotation.benchmark_check import violations
from annotation.collection import references, verification
from annotation.collection.waiting import settle_family
from annotation.crowdwork import configs, queue, review
from annotation.crowdwork.stopping import MOST_TRUSTED, WorkerAware, answers_to_ask
from annotation.models import (
    Assignment,
    GoldAnswer,
    GoldItem,
    Instance,
    InstructionFamily,
    LabelShare,
    Reference,
    Stage,
    StageConfig,
    StageQualification,
    WorkerModel,
    WorkerQualification,
    WorkerReliability,
    WorkUnit,
)
from annotation.workforce.accuracy import PRIOR_ANSWERS, Accuracy, accuracy_from, shrunk, verifier_accuracies
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, WorkerFactory, launch

CORRECT = {"is_correct": True}
WRONG = {"is_correct": False, "problem_in_response": True}


# --- the rule -----------------------------------------------------------------------------------


def test_one_answer_of_a_verifier_known_to_be_very_good_decides():
    rule = WorkerAware(0.95, 0.7)
    assert rule.decision([(True, 0.97)]) is True
    assert rule.decision([(False, 0.97)]) is False


def test_poor_verifiers_agreeing_do_not_decide_until_their_weight_passes_the_threshold():
    rule = WorkerAware(0.95, 0.7)
    poor = (True, 0.65)  # log-odds 0.62 each: five give 0.957
    assert [rule.decision([poor] * count) for count in range(1, 6)] == [None, None, None, None, True]
    assert rule.posteriors([poor] * 5)[True] == pytest.approx(1 / (1 + (0.35 / 0.65) ** 5))


def test_a_good_verifier_outweighs_two_poor_ones_who_disagree_with_them():
    rule = WorkerAware(0.8, 0.7)
    answers = [(False, 0.6), (False, 0.6), (True, 0.95)]
    assert rule.leading(answers) is True
    assert rule.posteriors(answers)[True] == pytest.approx(1 / (1 + (0.05 / 0.95) * (0.6 / 0.4) ** 2))


def test_an_answer_below_a_coin_toss_counts_for_nothing_rather_than_against_itself():
    rule = WorkerAware(0.9, 0.7)
    assert rule.posteriors([(True, 0.2)]) == {True: 0.5, False: 0.5}


@pytest.mark.parametrize("labels", [(True, False), ("1", "2", "3", "4")])
@pytest.mark.parametrize("by_truth", [False, True])
def test_a_posterior_exactly_at_the_threshold_decides_however_its_sums_round(labels, by_truth):
    # One answer of a worker right 0.7 of the time is worth a posterior of exactly 0.7.
    rule = WorkerAware(0.7, 0.7, labels=labels, by_truth=by_truth)
    for said in labels:
        assert rule.decision([(said, 0.7)]) == said
        assert rule.decision([(said, Accuracy(0.7, "prior"))]) == said


def test_no_answer_is_taken_as_never_wrong():
    rule = WorkerAware(0.999, 0.7)
    assert rule.decision([(True, 1.0)]) is None
    # Trusted at most MOST_TRUSTED, however sure the evidence: never odds of one to nothing.
    for by_truth in (False, True):
        rule = WorkerAware(0.999, 0.7, by_truth=by_truth)
        for accuracy in (1.0, Accuracy(1.0, "gold", 50, {True: 1.0, False: 1.0})):
            posteriors = rule.posteriors([(True, accuracy)])
            assert all(math.isfinite(value) for value in posteriors.values())
            assert posteriors[True] == pytest.approx(MOST_TRUSTED)


def test_with_more_labels_a_wrong_answer_spreads_over_the_others():
    rule = WorkerAware(0.9, 0.7, labels=("1", "2", "3"))
    # Right 0.9 of the time, each wrong label 0.05: odds of 18 to 1 against each other label.
    assert rule.posteriors([("2", 0.9)])["2"] == pytest.approx(18 / 20)


def test_while_undecided_a_unit_asks_one_more_at_a_time_up_to_its_maximum():
    rule = WorkerAware(0.95, 0.7)
    poor = (True, 0.65)
    assert answers_to_ask(rule, [], 5) == 1
    assert [answers_to_ask(rule, [poor] * count, 5) for count in range(1, 5)] == [2, 3, 4, 5]
    assert answers_to_ask(rule, [poor] * 5, 5) == 5
    # Two very good verifiers who disagree need two more to decide, however good the next ones.
    assert answers_to_ask(rule, [(True, 0.97), (False, 0.97)], 5) == 3


def test_an_accuracy_is_shrunk_toward_the_prior_and_rests_on_enough_answers():
    assert shrunk(2, 2, 0.7) == pytest.approx((2 + PRIOR_ANSWERS * 0.7) / (2 + PRIOR_ANSWERS))
    assert accuracy_from(gold=(2, 2), fitted=None, prior=0.7, enough=5).source == "prior"
    by_gold = accuracy_from(gold=(9, 10), fitted=(0.6, 500), prior=0.7, enough=5)
    assert (by_gold.source, by_gold.value) == ("gold", pytest.approx(shrunk(9, 10, 0.7)))
    by_model = accuracy_from(gold=(3, 3), fitted=(0.6, 500), prior=0.7, enough=5)
    assert (by_model.source, by_model.value) == ("worker model", pytest.approx(shrunk(300, 500, 0.7)))


# --- by truth: a verifier who passes flawed references, and how common each verdict is -----------


def test_an_accuracy_without_labels_told_apart_weighs_as_one_accuracy_does():
    rule = WorkerAware(0.9, 0.7, by_truth=True)
    answers = [(True, 0.8), (False, 0.65), (True, 0.6)]
    as_evidence = [(label, Accuracy(value, "gold", 10)) for label, value in answers]
    assert rule.posteriors(as_evidence) == pytest.approx(rule.posteriors(answers))


def test_a_verifier_who_passes_flawed_references_is_believed_when_they_fail_one_not_when_they_pass_it():
    # Right on 0.95 of the sound references, 0.55 of the flawed ones: "correct" is what they say
    # of most references either way, "incorrect" they say almost only of flawed ones.
    lenient = Accuracy(0.75, "gold", 40, by_truth={True: 0.95, False: 0.55})
    assert WorkerAware(0.9, 0.7).posteriors([(True, lenient)])[True] == pytest.approx(0.75)  # one accuracy
    rule = WorkerAware(0.9, 0.7, by_truth=True)
    passed, failed = rule.posteriors([(True, lenient)]), rule.posteriors([(False, lenient)])
    assert passed[True] == pytest.approx(0.95 / (0.95 + 0.45))
    assert failed[False] == pytest.approx(0.55 / (0.55 + 0.05))
    assert rule.decision([(False, lenient)]) is False
    assert rule.decision([(True, lenient)]) is None
    assert answers_to_ask(rule, [(True, lenient)], 5) > answers_to_ask(rule, [(False, lenient)], 5)


def test_by_truth_a_verifier_who_says_correct_of_everything_tells_nothing_either_way():
    spammer = Accuracy(0.5, "worker model", 300, by_truth={True: 1.0, False: 0.0})
    rule = WorkerAware(0.9, 0.7, by_truth=True)
    assert rule.posteriors([(True, spammer)] * 3) == {True: pytest.approx(0.5), False: pytest.approx(0.5)}
    assert rule.posteriors([(False, spammer)]) == {True: pytest.approx(0.5), False: pytest.approx(0.5)}


def test_a_unit_starts_from_how_common_each_verdict_is_and_never_from_more_than_nine_to_one():
    assert WorkerAware(0.9, 0.7, shares={True: 0.8, False: 0.2}).shares == {}  # one accuracy: even odds
    usual = WorkerAware(0.9, 0.7, by_truth=True, shares={True: 0.8, False: 0.2})
    # One answer of the prior's accuracy: 0.8 x 0.7 against 0.2 x 0.3.
    assert usual.posteriors([(True, 0.7)])[True] == pytest.approx(0.56 / (0.56 + 0.06))
    assert usual.decision([(True, 0.7)]) is True and usual.decision([(False, 0.7)]) is None
    lopsided = WorkerAware(0.9, 0.7, by_truth=True, shares={True: 1.0, False: 0.0})
    assert lopsided.shares == {True: pytest.approx(0.9), False: pytest.approx(0.1)}
    assert lopsided.decision([]) is None
    assert lopsided.posteriors([(False, MOST_TRUSTED)])[False] > 0.9


def test_an_accuracy_by_truth_is_each_labels_evidence_pulled_toward_the_workers_one_accuracy():
    accuracy = accuracy_from(gold=(17, 20), fitted=None, prior=0.7, enough=5,
                             gold_by_truth={True: (15, 15), False: (2, 5), "never seen": (0, 0)})
    assert accuracy.value == pytest.approx(shrunk(17, 20, 0.7))
    assert accuracy.by_truth == {True: pytest.approx(shrunk(15, 15, accuracy.value)),
                                 False: pytest.approx(shrunk(2, 5, accuracy.value))}
    assert accuracy.on("never seen") == accuracy.value
    fitted = accuracy_from(gold=(0, 0), fitted=(0.8, 100), prior=0.7, enough=5,
                           fitted_by_truth={True: 0.9, False: 0.4}, shares={True: 0.8, False: 0.2})
    assert fitted.by_truth == {True: pytest.approx(shrunk(72, 80, fitted.value)),
                               False: pytest.approx(shrunk(8, 20, fitted.value))}


# --- on PostgreSQL, through the real submit -----------------------------------------------------


def qualified_with_gold(worker, *, right, wrong, truth="correct"):
    """`worker` qualified for verification, with `right` and `wrong` checked gold answers on a gold
    item whose answer is `truth`."""
    qualification, _ = StageQualification.objects.get_or_create(
        stage=Stage.VERIFICATION, defaults={"name": "Verify", "description": "Is the reference right?"})
    WorkerQualification.objects.create(qualification=qualification, worker=worker, test_score="0.900")
    item = GoldItem.objects.create(qualification=qualification, content={}, question="Correct?",
                                   options=["correct", "incorrect"], answer=truth)
    for correct in [True] * right + [False] * wrong:
        GoldAnswer.objects.create(item=item, worker=worker, source=GoldAnswer.Source.LIVE, answer="x",
                                  correct=correct)
    return worker


def with_gold(worker, *, right, wrong, truth):
    """More checked gold answers of `worker` (qualified already) on an item whose answer is `truth`."""
    item = GoldItem.objects.create(qualification=StageQualification.objects.get(stage=Stage.VERIFICATION),
                                   content={}, question="Correct?", options=["correct", "incorrect"], answer=truth)
    for correct in [True] * right + [False] * wrong:
        GoldAnswer.objects.create(item=item, worker=worker, source=GoldAnswer.Source.LIVE, answer="x",
                                  correct=correct)
    return worker


def candidate(family):
    instance = InstanceFactory(family=family, status=Instance.Status.AWAITING_REFERENCE)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    return references.store_reference(instance=instance, text="Three sheep.", source=Reference.Source.MANUAL)


def weighed_family(overlap=5):
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=overlap, adaptive=True,
           stopping=StageConfig.Stopping.WORKER_ACCURACY, posterior_threshold=0.95, prior_accuracy=0.7)
    return family


def verify_until_done(reference, workers, answer):
    """Workers take turns answering `reference` until its unit closes; returns how many answered."""
    for count, worker in enumerate(workers, start=1):
        assignment = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
        assert assignment is not None and assignment.unit.reference_id == reference.pk
        verification.submit_verification(assignment_id=assignment.pk, worker=worker, **answer)
        if WorkUnit.objects.get(reference=reference).status == WorkUnit.Status.DONE:
            return count
    return len(workers)


@pytest.mark.django_db
def test_worker_aware_stopping_asks_more_of_a_poor_verifiers_items_than_of_a_good_ones():
    family = weighed_family()
    good = qualified_with_gold(WorkerFactory(), right=30, wrong=0)  # 0.96 once shrunk
    poor = [qualified_with_gold(WorkerFactory(), right=6, wrong=4) for _ in range(5)]  # 0.63 each

    first = candidate(family)
    assert WorkUnit.objects.get(reference=first).overlap == 1
    bought_of_good = verify_until_done(first, [good, *poor], CORRECT)
    second = candidate(family)
    bought_of_poor = verify_until_done(second, poor, CORRECT)

    first.refresh_from_db(), second.refresh_from_db()
    assert (bought_of_good, bought_of_poor) == (1, 5)
    assert first.verdict == second.verdict == Reference.Verdict.CORRECT
    assert WorkUnit.objects.get(reference=second).overlap == 5


@pytest.mark.django_db
@pytest.mark.parametrize("stopping", [StageConfig.Stopping.WORKER_ACCURACY,
                                      StageConfig.Stopping.WORKER_ACCURACY_BY_VERDICT])
def test_by_verdict_a_lenient_verifiers_fail_decides_alone_and_their_pass_asks_for_more(stopping):
    """Right on all 20 sound gold references, on 4 of 10 flawed ones: by one accuracy (0.79 once
    shrunk) neither verdict of theirs decides at 0.9; by verdict, their "incorrect" does (they say it
    almost only of flawed references), and their "correct" asks for another verifier."""
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=3, adaptive=True, stopping=stopping, posterior_threshold=0.9,
           prior_accuracy=0.7)
    lenient = with_gold(qualified_with_gold(WorkerFactory(), right=20, wrong=0), right=4, wrong=6,
                        truth="incorrect")
    failed, passed = candidate(family), candidate(family)
    for reference, answer in ((failed, WRONG), (passed, CORRECT)):
        assignment = queue.next_assignment(worker=lenient, stage=Stage.VERIFICATION)
        assert assignment.unit.reference_id == reference.pk
        verification.submit_verification(assignment_id=assignment.pk, worker=lenient, **answer)
    closed = {reference: WorkUnit.objects.get(reference=reference).status == WorkUnit.Status.DONE
              for reference in (failed, passed)}
    by_verdict = stopping == StageConfig.Stopping.WORKER_ACCURACY_BY_VERDICT
    assert closed == {failed: by_verdict, passed: False}
    failed.refresh_from_db()
    assert failed.verdict == (Reference.Verdict.INCORRECT if by_verdict else Reference.Verdict.PENDING)


@pytest.mark.django_db
def test_undecided_at_the_most_it_asks_the_verdict_is_the_more_probable_one_not_the_votes():
    family = weighed_family(overlap=3)
    good = qualified_with_gold(WorkerFactory(), right=30, wrong=0)
    poor = [qualified_with_gold(WorkerFactory(), right=6, wrong=4) for _ in range(2)]
    reference = candidate(family)
    for worker, answer in ((poor[0], WRONG), (poor[1], WRONG), (good, CORRECT)):
        assignment = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
        verification.submit_verification(assignment_id=assignment.pk, worker=worker, **answer)
    reference.refresh_from_db()
    # Two poor "incorrect" against one very good "correct": 0.91 for correct, short of 0.95.
    assert WorkUnit.objects.get(reference=reference).status == WorkUnit.Status.DONE
    assert reference.verdict == Reference.Verdict.CORRECT


@pytest.mark.django_db
def test_without_gold_a_verifier_weighs_by_the_worker_models_accuracy_else_the_prior():
    fitted, unknown = WorkerFactory(), WorkerFactory()
    WorkerReliability.objects.create(worker=fitted, stage=Stage.VERIFICATION, family=None,
                                     model=WorkerModel.DAWID_SKENE, reliability=0.9, answers=200,
                                     fitted_at="2026-11-28T00:00:00Z")
    known = verifier_accuracies([fitted.pk, unknown.pk], prior=0.7, enough=5).of
    assert known[fitted.pk].source == "worker model"
    assert known[fitted.pk].value == pytest.approx(shrunk(180, 200, 0.7))
    assert (known[unknown.pk].source, known[unknown.pk].value) == ("prior", 0.7)
    assert known[fitted.pk].by_truth == {}  # a fit from before the job kept accuracies by truth


@pytest.mark.django_db
def test_without_gold_a_verifiers_accuracy_on_each_verdict_is_the_worker_models_with_its_share():
    fitted = WorkerFactory()
    WorkerReliability.objects.create(worker=fitted, stage=Stage.VERIFICATION, family=None,
                                     model=WorkerModel.DAWID_SKENE, reliability=0.9, answers=200,
                                     by_truth={"correct": 0.95, "incorrect": 0.7}, fitted_at="2026-11-28T00:00:00Z")
    for label, share in (("correct", 0.8), ("incorrect", 0.2)):
        LabelShare.objects.create(stage=Stage.VERIFICATION, model=WorkerModel.DAWID_SKENE, label=label, share=share,
                                  fitted_at="2026-11-28T00:00:00Z")
    evidence = verifier_accuracies([fitted.pk], prior=0.7, enough=5)
    accuracy = evidence.of[fitted.pk]
    # 160 of the worker's 200 answers were on sound references by the fit's share, 40 on flawed ones.
    assert accuracy.by_truth == {True: pytest.approx(shrunk(0.95 * 160, 160, accuracy.value)),
                                 False: pytest.approx(shrunk(0.7 * 40, 40, accuracy.value))}
    assert evidence.shares == {True: pytest.approx(0.8), False: pytest.approx(0.2)}


@pytest.mark.django_db
def test_the_accuracies_of_a_units_verifiers_are_one_query_however_many(django_assert_num_queries):
    workers = [qualified_with_gold(WorkerFactory(), right=8, wrong=2) for _ in range(6)]
    WorkerReliability.objects.create(worker=workers[0], stage=Stage.VERIFICATION, family=None,
                                     model=WorkerModel.DAWID_SKENE, reliability=0.9, answers=200,
                                     by_truth={"correct": 0.95, "incorrect": 0.7}, fitted_at="2026-11-28T00:00:00Z")
    LabelShare.objects.create(stage=Stage.VERIFICATION, model=WorkerModel.DAWID_SKENE, label="correct", share=0.8,
                              fitted_at="2026-11-28T00:00:00Z")
    with django_assert_num_queries(1):
        known = verifier_accuracies([worker.pk for worker in workers], prior=0.7, enough=5)
    assert {accuracy.source for accuracy in known.of.values()} == {"gold"}
    assert known.shares == {True: pytest.approx(0.8), False: pytest.approx(0.2)}


@pytest.mark.django_db
def test_a_threshold_or_prior_outside_a_half_to_one_is_refused():
    config = StageConfig(family=FamilyFactory(), stage=Stage.VERIFICATION, overlap=5, adaptive=True,
                         stopping=StageConfig.Stopping.WORKER_ACCURACY, posterior_threshold=1.0)
    with pytest.raises(ValidationError):
        config.full_clean()


@pytest.mark.django_db
def test_a_researcher_chooses_it_on_the_stage_settings_and_open_references_ask_what_it_needs(admin_client):
    family = FamilyFactory()
    config = launch(family, Stage.VERIFICATION, overlap=5, adaptive=True, agree_to_decide=3)
    reference = candidate(family)
    assert WorkUnit.objects.get(reference=reference).overlap == 3
    url = reverse("admin:annotation_stageconfig_change", args=[config.pk])
    page = admin_client.get(url).content.decode()
    assert "each verifier weighed by their accuracy" in page and "prior accuracy" in page.lower()

    posted = {name: getattr(config, name) for name in (
        "family", "stage", "overlap", "lease_minutes", "verification_rule", "aggregation", "agree_to_decide",
        "on_incorrect", "max_caption_rounds", "model_min_answers", "model_min_posterior")}
    posted.update(family=family.pk, adaptive="on", counts_provisional="on", posterior_threshold=0.9,
                  prior_accuracy=0.7, stopping=StageConfig.Stopping.WORKER_ACCURACY)
    assert admin_client.post(url, posted).status_code == 302

    # The first answer of a verifier good enough could decide it now: one is asked, not three.
    assert WorkUnit.objects.get(reference=reference).overlap == 1
    workflow = admin_client.get(reverse("admin:annotation_instructionfamily_workflow", args=[family.pk]))
    assert "ask until decided (each verifier weighed by their accuracy, to a posterior of 0.90, up to 5)" \
        in workflow.content.decode()


@pytest.mark.django_db
def test_a_unit_its_answers_closed_stays_complete_when_its_verifiers_accuracy_moves_after():
    """A unit closes once its answers decide, on its verifiers' accuracies then. Their accuracy moves
    with every gold answer and every refit of the worker model; the answers that closed the unit
    are still all it asked, so its reference is decided when they count (here: once a reviewer
    accepts them), never left pending with nothing asking for another answer."""
    family = weighed_family()
    StageConfig.objects.filter(family=family, stage=Stage.VERIFICATION).update(counts_provisional=False)
    good = qualified_with_gold(WorkerFactory(), right=30, wrong=0)
    reference = candidate(family)
    assert verify_until_done(reference, [good], CORRECT) == 1
    # Their gold since: 30 of 50 right, 0.61 once shrunk, which alone would no longer decide at 0.95.
    with_gold(good, right=0, wrong=20, truth="correct")
    review.accept_work(assignments=list(Assignment.objects.filter(unit__reference=reference)),
                       reviewer=get_user_model().objects.create_user(username="reviewer"))
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.CORRECT
    assert violations(families=InstructionFamily.objects.filter(pk=family.pk)) == []


@pytest.mark.django_db
def test_a_closed_unit_is_not_asked_again_because_its_verifiers_accuracy_moved_when_a_setting_elsewhere_changes():
    """A change to a stage's settings asks every undecided item again. A unit its answers closed
    keeps what it asked when only its verifiers' accuracies moved since: asking again on today's
    accuracies would buy an answer at every save. Its rule's own settings changing does ask again."""
    family = weighed_family()
    config = StageConfig.objects.get(family=family, stage=Stage.VERIFICATION)
    StageConfig.objects.filter(pk=config.pk).update(counts_provisional=False)
    good = qualified_with_gold(WorkerFactory(), right=30, wrong=0)
    reference = candidate(family)
    assert verify_until_done(reference, [good], CORRECT) == 1
    with_gold(good, right=0, wrong=20, truth="correct")  # alone, no longer enough to decide at 0.95

    config.refresh_from_db()
    before = {name: getattr(config, name) for name in configs.APPLIED_FIELDS}
    config.lease_minutes += 10
    config.save()
    applied = configs.apply_stage_config(config=config, before=before)
    unit = WorkUnit.objects.get(reference=reference)
    assert (applied.units_reopened, unit.status, unit.overlap) == (0, WorkUnit.Status.DONE, 1)
    assert settle_family(family).units_reopened == 0

    before = {name: getattr(config, name) for name in configs.APPLIED_FIELDS}
    config.posterior_threshold = 0.96
    config.save()
    assert configs.apply_stage_config(config=config, before=before).units_reopened == 1
    assert WorkUnit.objects.get(reference=reference).status == WorkUnit.Status.OPEN


@pytest.mark.django_db
def test_a_decision_waits_for_the_answers_that_closed_its_unit_not_as_many_others():
    """Under a stage that counts reviewed answers only, "as many answers as the unit asked" is
    enough when they are the answers that closed it. A rejected answer accepted again after others
    replaced it makes more answers than the unit asked; as many of them counted, with one that
    closed it still waiting for its review, are not the set that decided, and wait for the rule, or
    for the rest to count."""
    family = weighed_family(overlap=7)
    StageConfig.objects.filter(family=family, stage=Stage.VERIFICATION).update(counts_provisional=False)
    fair = qualified_with_gold(WorkerFactory(), right=16, wrong=2)  # 0.85 once shrunk
    poor = [qualified_with_gold(WorkerFactory(), right=6, wrong=4) for _ in range(6)]  # 0.63 each
    reviewer = get_user_model().objects.create_user(username="reviewer")
    reference = candidate(family)

    def answer_of(worker):
        return Assignment.objects.get(unit__reference=reference, worker=worker)

    # 0.85 and three at 0.63 agreeing pass 0.95; two at 0.63 and one against them do not.
    assert verify_until_done(reference, [fair, *poor[:3]], CORRECT) == 4
    review.reject_work(assignments=[answer_of(poor[2])], reason="Answered too fast.", reviewer=reviewer)
    assert verify_until_done(reference, [poor[3]], WRONG) == 1
    assert verify_until_done(reference, poor[4:], CORRECT) == 2
    assert WorkUnit.objects.get(reference=reference).overlap == 6

    review.accept_work(assignments=[answer_of(poor[2])], reviewer=reviewer)
    review.accept_work(assignments=[answer_of(worker) for worker in poor], reviewer=reviewer)
    reference.refresh_from_db()
    # Six counted, five poor verifiers' "correct" and one's "wrong", decide nothing at 0.95.
    assert reference.verdict == Reference.Verdict.PENDING
    review.accept_work(assignments=[answer_of(fair)], reviewer=reviewer)
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.CORRECT
    assert violations(families=InstructionFamily.objects.filter(pk=family.pk)) == []

    # One of the answers that closed it rejected now leaves six, as many as it asked, that decide
    # nothing: the unit asks again rather than the reference being decided on them.
    outcome = review.reject_work(assignments=[answer_of(fair)], reason="Answered too fast.", reviewer=reviewer)
    reference.refresh_from_db()
    assert (outcome.units_reopened, reference.verdict) == (1, Reference.Verdict.PENDING)
    assert WorkUnit.objects.get(reference=reference).status == WorkUnit.Status.OPEN
    assert violations(families=InstructionFamily.objects.filter(pk=family.pk)) == []


@pytest.mark.django_db
def test_a_verification_gold_items_answer_is_kept_as_the_verdict_the_stage_weighs_verifiers_by(admin_client):
    """Gold answers are scored case- and space-blind, and weighing by verdict counts them by the
    item's answer: so the admin keeps a verification item's answer as the verdict it names, and
    refuses one that names none, or an answer that is no option, rather than store what nobody can
    answer right or the stage cannot read."""
    qualification = StageQualification.objects.create(stage=Stage.VERIFICATION, name="Verify",
                                                      description="Is the reference right?")
    add = reverse("admin:annotation_golditem_add")

    def posted(answer, options='["Correct", "Incorrect"]'):
        return admin_client.post(add, {"qualification": qualification.pk, "kind": "choice",
                                       "content": '{"instruction": "How many sheep?"}',
                                       "question": "Is the reference right?", "options": options,
                                       "answer": f'"{answer}"', "explanation": "", "in_test": "on",
                                       "in_live_work": "on", "active": "on"})

    for answer, options, problem in (("yes", '["Correct", "Incorrect"]', "one of the options"),
                                     ("Fine", '["Fine", "Flawed"]', "“correct” or “incorrect”"),
                                     ("correct", "3", "The options are a JSON list")):
        response = posted(answer, options)
        assert response.status_code == 200 and problem in response.content.decode()
    assert not GoldItem.objects.exists()
    saved = posted(" Correct")
    assert saved.status_code == 302, saved.context_data["adminform"].form.errors
    item = GoldItem.objects.get()
    assert item.answer == "correct"
    worker = WorkerFactory()
    for correct in (True, True, True, False, True):
        GoldAnswer.objects.create(item=item, worker=worker, source=GoldAnswer.Source.LIVE, answer="Correct",
                                  correct=correct)
    accuracy = verifier_accuracies([worker.pk], prior=0.7, enough=5).of[worker.pk]
    assert (accuracy.source, set(accuracy.by_truth)) == ("gold", {True})


@pytest.mark.django_db
def test_gold_items_added_with_their_new_qualification_are_kept_as_verdicts_too(admin_client):
    response = admin_client.post(reverse("admin:annotation_stagequalification_add"), {
        "name": "Verify", "stage": Stage.VERIFICATION, "description": "Is the reference right?",
        "test_size": 5, "pass_score": "0.8", "live_accuracy_bar": "0.7", "live_gold_every": 10,
        "new_worker_gold_every": 3, "live_min_answers": 5, "live_window": 20, "retake_after_hours": 24,
        "gold_items-TOTAL_FORMS": 1, "gold_items-INITIAL_FORMS": 0,
        "gold_items-0-kind": "choice", "gold_items-0-content": '{"instruction": "How many sheep?"}',
        "gold_items-0-question": "Is the reference right?", "gold_items-0-options": '["correct", "incorrect"]',
        "gold_items-0-answer": '"Incorrect "', "gold_items-0-in_test": "on", "gold_items-0-active": "on"})
    assert response.status_code == 302, response.context_data["errors"]
    assert GoldItem.objects.get().answer == "incorrect"


@pytest.mark.django_db
def test_a_fit_that_saw_one_verdict_only_still_says_how_common_each_is():
    # Every answer the job fitted said "incorrect": Dawid-Skene's priors name that verdict alone.
    LabelShare.objects.create(stage=Stage.VERIFICATION, model=WorkerModel.DAWID_SKENE, label="incorrect", share=1.0,
                              fitted_at="2026-11-28T00:00:00Z")
    assert verifier_accuracies([WorkerFactory().pk], prior=0.7, enough=5).shares == {True: 0.0, False: 1.0}
