"""Rows for the scoring tests: verified instances with model responses, tournaments and battles."""

import factory
from django.db import transaction

from annotation.models import HumanJudgement, Instance, ModelResponse, Rubric, Stage, Tournament
from annotation.preferences.judgements import pairwise_task, submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament, sample_battles
from annotation.queue import next_assignment
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, WorkerFactory

REFERENCE_TEXT = "The bicycle is red and leans against a blue door."


def verified_instance(*, family=None, image_count=None, caption=None, **fields):
    """A verified instance with its caption and reference, as the pipeline leaves it."""
    family = family or FamilyFactory()
    instance = InstanceFactory(
        family=family,
        status=Instance.Status.VERIFIED,
        reference_output=fields.pop("reference_output", REFERENCE_TEXT),
        image_count=image_count,
        **fields,
    )
    texts = caption or ["A red bicycle leans against a blue door in bright sunlight."]
    instance.current_caption = CaptionFactory(
        instance=instance,
        texts=texts * instance.instanceimage_set.count() if len(texts) == 1 else texts,
    )
    instance.save()
    return instance


class ModelResponseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelResponse

    instance = factory.LazyFunction(verified_instance)
    model_name = factory.Sequence(lambda n: f"model-{n}")
    text = factory.LazyAttribute(lambda r: f"{r.model_name} says the bicycle is red.")


def with_responses(instance, *model_names):
    return [ModelResponseFactory(instance=instance, model_name=name) for name in model_names]


def create_tournament(*, name, families=(), sample=True, **options):
    """A tournament as a researcher saves it in the admin, with its battles sampled (unless
    sample=False), in one transaction."""
    with transaction.atomic():
        tournament = Tournament.objects.create(name=name, **options)
        if families:
            tournament.families.set(families)
        if sample:
            sample_battles(tournament=tournament)
    return tournament


GROUNDED = "[Is the response grounded in the image?]\nScore 1: nothing in it is in the image.\nScore 5: all of it is."
FOLLOWS = "[Does the response follow the instruction?]\nScore 1: it ignores it.\nScore 5: it does all it asks."

# What each model's response deserves on each instance (by position): the crowd scores by it and
# prefers the better response.
DESERVES = {"llava": (5, 4, 5), "instructblip": (4, 4, 4), "otter": (2, 2, 2), "blip2": (1, 1, 1)}


def rubric_tournament(models=tuple(DESERVES)):
    """A rubric tournament judged through the real queue: three instances in two families (one
    with its own rubric, GROUNDED; the tournament's is FOLLOWS), every pair of `models` on each,
    two workers a battle, each scoring the responses as shown and choosing the better one."""
    grounded_family, plain_family = FamilyFactory(name="Art knowledge"), FamilyFactory(name="Contextual knowledge")
    instances = [verified_instance(family=grounded_family), verified_instance(family=plain_family),
                 verified_instance(family=plain_family)]
    for instance in instances:
        with_responses(instance, *models)
    tournament = create_tournament(name="Rubric pilot", judgements_per_pair=2, include_reference=False,
                                   with_rubric=True, rubric=FOLLOWS)
    Rubric.objects.create(tournament=tournament, family=grounded_family, text=GROUNDED)
    launch_tournament(tournament=tournament)
    position = {instance.pk: n for n, instance in enumerate(instances)}
    for _ in range(2):
        worker = WorkerFactory()
        while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
            # The worker reads the responses as shown, scores each by its side and picks the better.
            task = pairwise_task(assignment=assignment)
            n = position[task["battle"].instance_id]
            left, right = (DESERVES[task[side].model_name][n] for side in ("left", "right"))
            submit_pairwise_judgement(
                assignment_id=assignment.pk, worker=worker,
                choice="left" if left > right or (left == right and task["left"].model_name < task["right"].model_name)
                else "right",
                rubric_scores={"left": left, "right": right})
    # The server drew the sides: both occur, so a wrong side-to-model map would mix the scores.
    assert {j.shown_left for j in HumanJudgement.objects.all()} == set(HumanJudgement.ShownLeft.values)
    return tournament
