"""Each stage's transitions, from instruction family to verified or discarded instance."""

import pytest

from annotation.collection import captions, instructions, references, verification
from annotation.crowdwork import queue, stages
from annotation.exceptions import AnnotationError
from annotation.models import Assignment, Instance, InstructionFamily, Reference, Stage, StageConfig, WorkUnit
from tests.factories import (
    CaptionFactory,
    FamilyFactory,
    ImageAssetFactory,
    InstanceFactory,
    WorkerFactory,
    launch,
)

pytestmark = pytest.mark.django_db


def lease(stage, worker=None):
    worker = worker or WorkerFactory()
    return worker, queue.next_assignment(worker=worker, stage=stage)


def test_launching_generation_creates_one_unit_per_missing_instance():
    family = FamilyFactory(target_instances=4)
    InstanceFactory(family=family)
    launch(family, Stage.INSTRUCTION_GENERATION)
    assert stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION) == 3
    assert stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION) == 0


def test_unlaunched_stage_gets_no_units():
    family = FamilyFactory()
    assert stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION) == 0


def test_reformatted_family_cannot_launch_instruction_generation():
    family = FamilyFactory(source=InstructionFamily.Source.REFORMATTED, source_dataset="NLVR2")
    with pytest.raises(AnnotationError, match="bulk import"):
        stages.launch_stage(family=family, stage=Stage.INSTRUCTION_GENERATION)


def test_submitted_instruction_creates_an_instance_awaiting_a_caption():
    family = FamilyFactory(target_instances=1)
    launch(family, Stage.INSTRUCTION_GENERATION)
    launch(family, Stage.CAPTION)
    stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION)
    worker, assignment = lease(Stage.INSTRUCTION_GENERATION)
    instance = instructions.submit_instruction(
        assignment_id=assignment.pk, worker=worker, images=[ImageAssetFactory()],
        instruction="Why is the crowd gathered here?", active_seconds=42.5,
    )
    assert instance.status == Instance.Status.AWAITING_CAPTION
    assert instance.author == worker
    assert WorkUnit.objects.filter(stage=Stage.CAPTION, instance=instance).exists()
    assignment.refresh_from_db()
    assert assignment.active_seconds == 42.5
    assert assignment.unit.status == WorkUnit.Status.DONE


def test_double_submitted_instruction_is_stored_once():
    family = FamilyFactory(target_instances=1)
    launch(family, Stage.INSTRUCTION_GENERATION)
    stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION)
    worker, assignment = lease(Stage.INSTRUCTION_GENERATION)
    kwargs = dict(assignment_id=assignment.pk, worker=worker, images=[ImageAssetFactory()],
                  instruction="What is the man holding and why?")
    assert instructions.submit_instruction(**kwargs) == instructions.submit_instruction(**kwargs)
    assert Instance.objects.count() == 1


def test_single_image_family_refuses_two_images():
    family = FamilyFactory(target_instances=1)
    launch(family, Stage.INSTRUCTION_GENERATION)
    stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION)
    worker, assignment = lease(Stage.INSTRUCTION_GENERATION)
    with pytest.raises(AnnotationError, match="exactly one image"):
        instructions.submit_instruction(assignment_id=assignment.pk, worker=worker,
                                    images=[ImageAssetFactory(), ImageAssetFactory()],
                                    instruction="Which of these is older?")
    assert Instance.objects.count() == 0


def caption_unit(*, image_count=1):
    instance = InstanceFactory(image_count=image_count)
    launch(instance.family, Stage.CAPTION)
    stages.create_work_units(family=instance.family, stage=Stage.CAPTION)
    return instance


def test_caption_needs_one_text_per_image():
    caption_unit(image_count=2)
    worker, assignment = lease(Stage.CAPTION)
    with pytest.raises(AnnotationError, match="each of the 2 images"):
        captions.submit_caption(assignment_id=assignment.pk, worker=worker,
                                texts=["A long caption of the first image, with details."])


def test_short_caption_is_refused_with_the_guidance():
    caption_unit()
    worker, assignment = lease(Stage.CAPTION)
    with pytest.raises(AnnotationError, match="sees only your text"):
        captions.submit_caption(assignment_id=assignment.pk, worker=worker, texts=["A dog."])


def test_submitted_caption_makes_the_instance_await_its_reference():
    instance = caption_unit()
    worker, assignment = lease(Stage.CAPTION)
    caption = captions.submit_caption(
        assignment_id=assignment.pk, worker=worker,
        texts=["A border collie runs beside six sheep on a green hill."],
    )
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_REFERENCE
    assert instance.current_caption == caption
    assert caption.author == worker


def reference_under_verification(*, overlap=1, rule=StageConfig.VerificationRule.UNANIMOUS,
                                 on_incorrect=StageConfig.IncorrectAction.DISCARD):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    launch(instance.family, Stage.VERIFICATION, overlap=overlap, verification_rule=rule,
           on_incorrect=on_incorrect)
    reference = references.store_reference(instance=instance, text="Three sheep.",
                                         source=Reference.Source.MANUAL)
    return instance, reference


def verify(**answer):
    worker, assignment = lease(Stage.VERIFICATION)
    return verification.submit_verification(assignment_id=assignment.pk, worker=worker, **answer)


def test_stored_reference_opens_a_verification_unit():
    instance, reference = reference_under_verification()
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_VERIFICATION
    assert WorkUnit.objects.get(stage=Stage.VERIFICATION).reference == reference


def test_correct_verification_verifies_the_instance():
    instance, reference = reference_under_verification()
    verify(is_correct=True)
    instance.refresh_from_db()
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.CORRECT
    assert instance.status == Instance.Status.VERIFIED
    assert instance.reference_output == "Three sheep."


def test_incorrect_response_discards_the_instance_as_in_the_paper():
    instance, reference = reference_under_verification()
    verify(is_correct=False, problem_in_response=True)
    instance.refresh_from_db()
    reference.refresh_from_db()
    assert instance.status == Instance.Status.DISCARDED
    assert reference.problem_in_response and not reference.problem_in_caption


def test_incorrect_needs_to_say_where_the_problem_is():
    reference_under_verification()
    with pytest.raises(AnnotationError, match="where the problem is"):
        verify(is_correct=False)


def test_caption_problem_sends_the_instance_back_for_a_new_caption_when_asked():
    instance, _ = reference_under_verification(on_incorrect=StageConfig.IncorrectAction.RECAPTION)
    launch(instance.family, Stage.CAPTION)
    verify(is_correct=False, problem_in_caption=True, is_harmful=True)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_CAPTION
    assert WorkUnit.objects.filter(stage=Stage.CAPTION, instance=instance,
                                   status=WorkUnit.Status.OPEN).exists()
    assert Reference.objects.get().flagged_harmful


def test_reference_waits_for_every_verifier_before_it_is_decided():
    instance, reference = reference_under_verification(overlap=3)
    verify(is_correct=True)
    verify(is_correct=True)
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.PENDING
    verify(is_correct=False, problem_in_response=True)
    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.INCORRECT


@pytest.mark.parametrize(
    ("rule", "verdict"),
    [
        (StageConfig.VerificationRule.UNANIMOUS, Reference.Verdict.INCORRECT),
        (StageConfig.VerificationRule.MAJORITY, Reference.Verdict.CORRECT),
        (StageConfig.VerificationRule.ANY, Reference.Verdict.CORRECT),
    ],
)
def test_agreement_rule_decides_two_correct_one_incorrect(rule, verdict):
    _, reference = reference_under_verification(overlap=3, rule=rule)
    verify(is_correct=True)
    verify(is_correct=True)
    verify(is_correct=False, problem_in_response=True)
    reference.refresh_from_db()
    assert reference.verdict == verdict


def test_manual_reference_needs_a_caption_first():
    instance = InstanceFactory()
    with pytest.raises(AnnotationError, match="once it has a caption"):
        references.add_manual_reference(instance=instance, text="Two cats.", user=None)


def test_new_caption_identical_to_a_sent_back_one_is_refused():
    instance, _ = reference_under_verification(on_incorrect=StageConfig.IncorrectAction.RECAPTION)
    launch(instance.family, Stage.CAPTION)
    verify(is_correct=False, problem_in_caption=True)
    worker, assignment = lease(Stage.CAPTION)
    with pytest.raises(AnnotationError, match="same as one that was sent back"):
        captions.submit_caption(assignment_id=assignment.pk, worker=worker,
                                texts=instance.captions.get().texts)


# --- owed work: every unit's identity from facts that do not move --------------------------------


def caption(worker, stage=Stage.CAPTION, text="A border collie runs beside six sheep on a green hill."):
    assignment = queue.next_assignment(worker=worker, stage=stage)
    if assignment is None:
        return None
    return captions.submit_caption(assignment_id=assignment.pk, worker=worker, texts=[f"{text} ({worker.pk})"])


def test_a_partly_captioned_unit_owes_nothing_and_a_rerun_makes_no_second_round():
    # The reproduction: overlap 3, one caption in, the sweep's job, then four workers.
    instance = InstanceFactory()
    launch(instance.family, Stage.CAPTION, overlap=3)
    stages.create_work_units(family=instance.family, stage=Stage.CAPTION)
    first = WorkerFactory()
    caption(first)
    assert not stages.units_owed(family=instance.family, stage=Stage.CAPTION)
    assert stages.create_work_units(family=instance.family, stage=Stage.CAPTION) == 0
    for worker in [first, *WorkerFactory.create_batch(3)]:
        caption(worker)
    assert WorkUnit.objects.filter(stage=Stage.CAPTION).count() == 1
    assert list(instance.captions.values_list("round", flat=True)) == [1, 1, 1]
    assert instance.captions.values("author").distinct().count() == 3


def test_a_new_caption_round_is_a_unit_of_its_own_and_made_once():
    instance, _ = reference_under_verification(on_incorrect=StageConfig.IncorrectAction.RECAPTION)
    launch(instance.family, Stage.CAPTION, overlap=2)
    verify(is_correct=False, problem_in_caption=True)
    instance.refresh_from_db()
    assert instance.caption_round == 2
    assert stages.create_work_units(family=instance.family, stage=Stage.CAPTION) == 0
    unit = WorkUnit.objects.get(stage=Stage.CAPTION, instance=instance)
    assert unit.key == f"instance-{instance.pk}-round-2" and unit.overlap == 2
    caption(WorkerFactory())
    assert stages.create_work_units(family=instance.family, stage=Stage.CAPTION) == 0
    assert instance.captions.filter(round=2).count() == 1


def test_caption_rounds_are_counted_by_round_not_by_captions_in():
    # Two captions of one round (overlap 2) were two "rounds" to a count of captions, so the
    # instance was discarded with rounds left.
    instance, _ = reference_under_verification(on_incorrect=StageConfig.IncorrectAction.RECAPTION)
    CaptionFactory(instance=instance)
    launch(instance.family, Stage.CAPTION)
    verify(is_correct=False, problem_in_caption=True)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_CAPTION


def test_a_worker_never_answers_one_item_twice_whatever_units_name_it():
    instance = InstanceFactory()
    launch(instance.family, Stage.CAPTION, overlap=3)
    stages.create_work_units(family=instance.family, stage=Stage.CAPTION)
    # A second unit about the same instance, as the old keys made them.
    WorkUnit.objects.create(stage=Stage.CAPTION, key="made-by-an-old-sweep", family=instance.family,
                            instance=instance, overlap=3)
    worker = WorkerFactory()
    assert caption(worker) is not None
    assert queue.next_assignment(worker=worker, stage=Stage.CAPTION) is None
    assert not queue.units_open_to(worker=worker, stage=Stage.CAPTION).exists()


def test_a_discard_asks_for_its_replacement_at_once():
    family = FamilyFactory(target_instances=1)
    launch(family, Stage.INSTRUCTION_GENERATION)
    stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION)
    worker, assignment = lease(Stage.INSTRUCTION_GENERATION)
    instance = instructions.submit_instruction(assignment_id=assignment.pk, worker=worker,
                                               images=[ImageAssetFactory()], instruction="Why is he waving?")
    instance.status = Instance.Status.AWAITING_REFERENCE
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    launch(family, Stage.VERIFICATION)
    references.store_reference(instance=instance, text="He waves.", source=Reference.Source.MANUAL)
    assert not WorkUnit.objects.filter(stage=Stage.INSTRUCTION_GENERATION, status=WorkUnit.Status.OPEN).exists()
    verify(is_correct=False, problem_in_response=True)
    assert WorkUnit.objects.filter(stage=Stage.INSTRUCTION_GENERATION, status=WorkUnit.Status.OPEN).count() == 1
    assert stages.create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION) == 0


def test_a_decided_instance_is_asked_nothing_more_about_its_other_candidates():
    instance, reference = reference_under_verification(overlap=1)
    pasted = references.add_manual_reference(instance=instance, text="Four sheep.", user=None)
    assert WorkUnit.objects.filter(stage=Stage.VERIFICATION, status=WorkUnit.Status.OPEN).count() == 2
    worker, assignment = lease(Stage.VERIFICATION)
    verification.submit_verification(assignment_id=assignment.pk, worker=worker, is_correct=True)
    open_units = WorkUnit.objects.filter(stage=Stage.VERIFICATION, status=WorkUnit.Status.OPEN)
    assert not open_units.exists()
    assert {reference.pk, pasted.pk} == set(WorkUnit.objects.values_list("reference", flat=True))


def test_instruction_generation_asks_one_worker_per_task():
    family = FamilyFactory()
    with pytest.raises(AnnotationError, match="overlap is 1"):
        stages.launch_stage(family=family, stage=Stage.INSTRUCTION_GENERATION, overlap=2)


def test_surplus_work_reports_what_is_flagged():
    from io import StringIO

    from django.core.management import call_command

    instance = InstanceFactory()
    unit = WorkUnit.objects.create(stage=Stage.CAPTION, key="instance-1-round-2-surplus-9", family=instance.family,
                                   instance=instance, overlap=3, surplus=True, status=WorkUnit.Status.CANCELLED)
    worker = WorkerFactory()
    lease = Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                      lease_expires_at=unit.created_at)
    CaptionFactory(instance=instance, author=worker, assignment=lease)
    CaptionFactory(instance=instance, author=worker)
    out = StringIO()
    call_command("surplus_work", stdout=out)
    assert out.getvalue().splitlines() == [
        "1 surplus caption unit(s) on 1 instance(s), all closed: 0 held no answer, 1 held answers already bought",
        "1 surplus caption(s) from 1 worker(s), kept, flagged by their unit's `surplus` and left in every aggregate",
        "1 caption(s) by a worker who had already captioned the same instance",
    ]
