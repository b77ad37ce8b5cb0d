"""Review with consequences: a rejected answer leaves every aggregate, its unit asks someone else,
and what was built on it is undone while nothing more was built on that; settings reach open work."""

import pytest

from annotation.collection import captions, instructions, progress, references, verification
from annotation.crowdwork import configs, queue, review, stages
from annotation.exceptions import AnnotationError
from annotation.models import (
    Assignment,
    Caption,
    Instance,
    Reference,
    Stage,
    StageConfig,
    WorkState,
    WorkUnit,
)
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring.battles import human_battles
from tests.factories import CaptionFactory, FamilyFactory, ImageAssetFactory, InstanceFactory, WorkerFactory, launch
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db


def reference_under_verification(*, overlap=1, **options):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    launch(instance.family, Stage.VERIFICATION, overlap=overlap, **options)
    reference = references.store_reference(instance=instance, text="Three sheep.", source=Reference.Source.MANUAL)
    return instance, reference


def verify(worker=None, **answer):
    worker = worker or WorkerFactory()
    assignment = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
    assert assignment is not None, "nothing to verify"
    verification.submit_verification(assignment_id=assignment.pk, worker=worker, **answer)
    return assignment


def test_a_rejected_vote_reopens_its_decision_and_asks_another_worker():
    instance, reference = reference_under_verification()
    spammer = WorkerFactory()
    vote = verify(spammer, is_correct=True)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.VERIFIED
    assert progress.table2().overall.references == 1

    outcome = review.reject_work(assignments=[vote], reason="Answered in two seconds.")
    assert (outcome.changed, outcome.decisions_reopened, outcome.units_reopened) == (1, 1, 1)
    instance.refresh_from_db()
    reference.refresh_from_db()
    assert (instance.status, reference.verdict) == (Instance.Status.AWAITING_VERIFICATION, Reference.Verdict.PENDING)
    assert progress.table2().overall.references == 0
    # The spammer is not asked again; someone else is, and their vote decides.
    assert queue.next_assignment(worker=spammer, stage=Stage.VERIFICATION) is None
    verify(is_correct=False, problem_in_response=True)
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.INCORRECT
    assert reference.verifications.count() == 2  # the rejected vote is kept, out of the count


def test_a_reopened_decision_takes_its_battles_out_of_the_ratings_and_the_queue_until_made_again():
    instance, reference = reference_under_verification()
    vote = verify(is_correct=True)
    with_responses(Instance.objects.get(pk=instance.pk), "llava", "otter")
    tournament = create_tournament(name="In battles", include_reference=False, judgements_per_pair=2)
    launch_tournament(tournament=tournament)
    judge = WorkerFactory()
    lease = queue.next_assignment(worker=judge, stage=Stage.PAIRWISE)
    submit_pairwise_judgement(assignment_id=lease.pk, worker=judge, choice="left")
    assert len(human_battles(tournament=tournament)) == 1

    review.reject_work(assignments=[vote], reason="Careless.")
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_VERIFICATION
    assert len(human_battles(tournament=tournament)) == 0
    assert queue.next_assignment(worker=WorkerFactory(), stage=Stage.PAIRWISE) is None
    verify(is_correct=True)
    assert len(human_battles(tournament=tournament)) == 1
    assert queue.next_assignment(worker=WorkerFactory(), stage=Stage.PAIRWISE) is not None


def test_a_rejected_caption_that_went_to_the_model_withdraws_its_reference_and_asks_again():
    instance = InstanceFactory()
    launch(instance.family, Stage.CAPTION)
    launch(instance.family, Stage.VERIFICATION)
    stages.create_work_units(family=instance.family, stage=Stage.CAPTION)
    author = WorkerFactory()
    lease = queue.next_assignment(worker=author, stage=Stage.CAPTION)
    caption = captions.submit_caption(assignment_id=lease.pk, worker=author,
                                      texts=["Copied from another task, not about this image at all."])
    reference = references.store_reference(instance=Instance.objects.get(pk=instance.pk), text="Yes.",
                                           source=Reference.Source.MANUAL)
    assert WorkUnit.objects.get(stage=Stage.VERIFICATION).status == WorkUnit.Status.OPEN

    review.reject_work(assignments=[lease], reason="The caption is not about this image.")
    instance.refresh_from_db()
    reference.refresh_from_db()
    assert (instance.status, instance.current_caption) == (Instance.Status.AWAITING_CAPTION, None)
    assert reference.verdict == Reference.Verdict.WITHDRAWN
    assert WorkUnit.objects.get(stage=Stage.VERIFICATION).status == WorkUnit.Status.CANCELLED
    other = WorkerFactory()
    again = queue.next_assignment(worker=other, stage=Stage.CAPTION)
    assert again.unit_id == lease.unit_id
    assert queue.next_assignment(worker=author, stage=Stage.CAPTION) is None
    new = captions.submit_caption(assignment_id=again.pk, worker=other,
                                  texts=["A border collie herds six sheep across a green hill."])
    instance.refresh_from_db()
    assert instance.current_caption == new and caption.round == new.round == 1


def test_a_rejected_judgement_leaves_the_leaderboard_and_its_battle_asks_another_worker():
    with_responses(verified_instance(), "llava", "otter")
    tournament = create_tournament(name="Reviewed", include_reference=False, judgements_per_pair=1)
    launch_tournament(tournament=tournament)
    spammer = WorkerFactory()
    lease = queue.next_assignment(worker=spammer, stage=Stage.PAIRWISE)
    submit_pairwise_judgement(assignment_id=lease.pk, worker=spammer, choice="left")
    assert len(human_battles(tournament=tournament)) == 1
    review.reject_work(assignments=[lease], reason="Always left.")
    assert len(human_battles(tournament=tournament)) == 0
    assert queue.next_assignment(worker=WorkerFactory(), stage=Stage.PAIRWISE).unit_id == lease.unit_id


def test_a_rejected_instruction_discards_its_instance_and_its_task_asks_someone_else():
    family = FamilyFactory(target_instances=1)
    launch(family, Stage.INSTRUCTION_GENERATION)
    launch(family, Stage.CAPTION)
    stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION)
    writer = WorkerFactory()
    lease = queue.next_assignment(worker=writer, stage=Stage.INSTRUCTION_GENERATION)
    instance = instructions.submit_instruction(assignment_id=lease.pk, worker=writer, images=[ImageAssetFactory()],
                                               instruction="Describe this unlicensed picture.")
    review.reject_work(assignments=[lease], reason="The image is not permissively licensed.")
    instance.refresh_from_db()
    assert instance.status == Instance.Status.DISCARDED
    assert not WorkUnit.objects.filter(stage=Stage.CAPTION, status=WorkUnit.Status.OPEN).exists()
    assert queue.next_assignment(worker=WorkerFactory(), stage=Stage.INSTRUCTION_GENERATION).unit_id == lease.unit_id
    assert stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION) == 0


def _discarded_by_a_vote(target_instances):
    """A family's instance discarded by one "problem in the response" vote, whose replacement task
    is open; the vote's assignment."""
    instance, reference = reference_under_verification()
    family = instance.family
    family.target_instances = target_instances
    family.save()
    launch(family, Stage.INSTRUCTION_GENERATION)
    vote = verify(is_correct=False, problem_in_response=True)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.DISCARDED
    return instance, vote


def test_a_rejected_vote_brings_back_a_discarded_instance_while_its_replacement_is_untouched():
    instance, vote = _discarded_by_a_vote(target_instances=1)
    replacement = WorkUnit.objects.get(stage=Stage.INSTRUCTION_GENERATION, status=WorkUnit.Status.OPEN)

    outcome = review.reject_work(assignments=[vote], reason="Careless.")
    assert (outcome.decisions_reopened, outcome.standing) == (1, [])
    instance.refresh_from_db()
    replacement.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_VERIFICATION
    assert replacement.status == WorkUnit.Status.CANCELLED


@pytest.mark.parametrize("replacement_submitted", [True, False])
def test_a_discard_stands_once_its_replacement_was_written_or_is_being_written(replacement_submitted):
    # Bringing the instance back would give the family more instances than its target: the
    # replacement's writer is owed their task, and their instance counts.
    instance, vote = _discarded_by_a_vote(target_instances=1)
    writer = WorkerFactory()
    lease = queue.next_assignment(worker=writer, stage=Stage.INSTRUCTION_GENERATION)
    if replacement_submitted:
        instructions.submit_instruction(assignment_id=lease.pk, worker=writer, images=[ImageAssetFactory()],
                                        instruction="What is the woman holding?")

    outcome = review.reject_work(assignments=[vote], reason="Careless.")
    assert outcome.decisions_reopened == 0
    assert outcome.standing == [f"Instance #{instance.pk}'s decision stands: its replacement was written or is "
                                "being written, and the family has all the instances it asks for."]
    instance.refresh_from_db()
    assert instance.status == Instance.Status.DISCARDED
    assert instance.family.instances.exclude(status=Instance.Status.DISCARDED).count() <= 1
    lease.refresh_from_db()
    assert lease.unit.status == (WorkUnit.Status.DONE if replacement_submitted else WorkUnit.Status.OPEN)


def test_a_stage_that_counts_only_accepted_answers_decides_on_acceptance():
    instance, reference = reference_under_verification(counts_provisional=False)
    vote = verify(is_correct=True)
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.PENDING
    outcome = review.accept_work(assignments=[vote])
    reference.refresh_from_db()
    assert (outcome.decided, reference.verdict) == (1, Reference.Verdict.CORRECT)
    assert Assignment.objects.get(pk=vote.pk).work_state == WorkState.ACCEPTED


def test_a_rejection_needs_a_reason_and_reviewing_twice_changes_nothing():
    _, _ = reference_under_verification()
    vote = verify(is_correct=True)
    with pytest.raises(AnnotationError, match="Say why"):
        review.reject_work(assignments=[vote], reason="  ")
    review.reject_work(assignments=[vote], reason="Careless.")
    again = review.reject_work(assignments=[vote], reason="Careless.")
    assert (again.changed, again.unchanged) == (0, 1)


def test_raising_an_overlap_reaches_the_open_units_and_lowering_it_decides_what_it_completes():
    instance, reference = reference_under_verification(overlap=1)
    config = StageConfig.objects.get(family=instance.family, stage=Stage.VERIFICATION)
    before = {name: getattr(config, name) for name in configs.APPLIED_FIELDS}
    config.overlap = 2
    config.save()
    applied = configs.apply_stage_config(config=config, before=before)
    assert applied.units_resized == 1
    assert WorkUnit.objects.get(stage=Stage.VERIFICATION).overlap == 2
    verify(is_correct=True)
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.PENDING  # one of two answers in

    before, config.overlap = {**before, "overlap": 2}, 1
    config.save()
    applied = configs.apply_stage_config(config=config, before=before)
    reference.refresh_from_db()
    assert (applied.units_resized, applied.units_completed, applied.decided) == (1, 1, 1)
    assert reference.verdict == Reference.Verdict.CORRECT
    assert "1 open task(s) now ask for the new number of answers" in applied.message()


def test_a_surplus_caption_keeps_counting_unless_rejected():
    instance = InstanceFactory()
    unit = WorkUnit.objects.create(stage=Stage.CAPTION, key="old", family=instance.family, instance=instance,
                                   surplus=True, status=WorkUnit.Status.CANCELLED)
    worker = WorkerFactory()
    lease = Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                      lease_expires_at=unit.created_at)
    CaptionFactory(instance=instance, author=worker, assignment=lease)
    review.reject_work(assignments=[lease], reason="Bought twice; the researcher leaves it out.")
    assert Caption.objects.filter(assignment__work_state=WorkState.REJECTED).count() == 1
    assert WorkUnit.objects.get(pk=unit.pk).status == WorkUnit.Status.CANCELLED


def test_a_reviewer_adjudicates_where_verifiers_disagree_and_it_is_recorded_as_such(django_user_model):
    instance, reference = reference_under_verification(
        overlap=2, verification_rule=StageConfig.VerificationRule.UNANIMOUS)
    verify(is_correct=True)
    verify(is_correct=False, problem_in_response=True)
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.INCORRECT
    reviewer = django_user_model.objects.create_user("reviewer", is_staff=True)
    with pytest.raises(AnnotationError, match="Say why"):
        verification.adjudicate(reference=reference, reviewer=reviewer, is_correct=True, note=" ")
    verification.adjudicate(reference=reference, reviewer=reviewer, is_correct=True,
                            note="The response counts three sheep, as the image shows.")
    reference.refresh_from_db()
    instance.refresh_from_db()
    assert (reference.verdict, reference.adjudicated_by, instance.status) == (
        Reference.Verdict.CORRECT, reviewer, Instance.Status.VERIFIED)
    assert "three sheep" in reference.adjudication_note
