"""Rows for the scoring tests: verified instances with model responses, tournaments and battles."""

import factory
from django.db import transaction
from django.utils import timezone

from annotation.crowdwork.queue import next_assignment
from annotation.models import HumanJudgement, Instance, ModelResponse, Reference, Rubric, Stage, Tournament
from annotation.preferences.judgements import pairwise_task, submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament, sample_battles
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
    decided_as_a_sheet_decides(instance).save()
    return instance


def decided_as_a_sheet_decides(instance):
    """The decided reference a verified instance holds (annotation/models/benchmark.py holds only
    instances with one), as a published sheet's import leaves it."""
    return Reference(instance=instance, caption=instance.current_caption, source=Reference.Source.IMPORTED,
                     text=instance.reference_output, verdict=Reference.Verdict.CORRECT,
                     decided_by=Reference.DecidedBy.SHEET, decided_at=timezone.now())


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
    # The server drew the sides: both occur, so a wrong side-to-model map would mix the scores. Each
    # side is drawn from the assignment's id, so with two models (six judgements) one side alone
    # comes up about 3% of the time; from three models on (18 judgements) about once in 130,000.
    sides = [judgement.shown_left for judgement in HumanJudgement.objects.all()]
    if len(sides) >= 16:
        assert set(sides) == set(HumanJudgement.ShownLeft.values)
    return tournament


def random_tournament(*, name, rng, models=15, questions=100, pairs_per_question=10, judgements_per_battle=2,
                      judge_runs=1, batch_size=10_000, chunk_questions=2_000):
    """A tournament of `models` models on `questions` verified instances, `pairs_per_question`
    random pairs of them per instance and `judgements_per_battle` human judgements of each with a
    random winner (each with its work unit and assignment, as a worker's submission leaves them),
    and `judge_runs` finished judge runs with a random verdict per ordering: bulk inserted through
    the models, `chunk_questions` instances at a time, as benchmarks/scale.py seeds its world. A
    handful of pairs per question keeps the crowd's preference graphs small, however random their
    verdicts."""
    import itertools

    from django.utils import timezone

    from annotation.models import Assignment, Battle, JudgeJudgement, JudgeRun, Worker, WorkUnit

    def bulk(model, rows):
        return model.objects.bulk_create(rows, batch_size=batch_size)

    now = timezone.now()
    names = [f"model-{n:02d}" for n in range(models)]
    pairs = list(itertools.combinations(names, 2))
    family = FamilyFactory()
    tournament = Tournament.objects.create(name=name, include_reference=False, model_names=names,
                                           judgements_per_pair=judgements_per_battle, launched_at=now)
    workers = bulk(Worker, [Worker(platform=Worker.Platform.LOCAL, external_id=f"{name}-worker-{n}")
                            for n in range(max(judgements_per_battle, 20))])
    runs = [JudgeRun.objects.create(tournament=tournament, engine=f"judge-{number}", status=JudgeRun.Status.DONE,
                                    finished_at=now) for number in range(judge_runs)]
    for first in range(0, questions, chunk_questions):
        instances = bulk(Instance, [Instance(family=family, instruction=f"What is unusual here? ({n})",
                                             status=Instance.Status.VERIFIED, reference_output=REFERENCE_TEXT)
                                    for n in range(first, min(questions, first + chunk_questions))])
        bulk(Reference, [decided_as_a_sheet_decides(instance) for instance in instances])
        responses = bulk(ModelResponse, [
            ModelResponse(instance=instance, model_name=model,
                          text=f"{model} answers question {instance.pk} " * rng.randint(1, 5))
            for instance in instances for model in names])
        response_of = {(response.instance_id, response.model_name): response for response in responses}
        per_question = min(pairs_per_question, len(pairs))
        battles = bulk(Battle, [Battle(tournament=tournament, instance=instance,
                                       response_a=response_of[instance.pk, a], response_b=response_of[instance.pk, b])
                                for instance in instances for a, b in rng.sample(pairs, per_question)])
        units = bulk(WorkUnit, [WorkUnit(stage=Stage.PAIRWISE, key=f"battle-{battle.pk}", family=family,
                                         instance_id=battle.instance_id, battle=battle, overlap=judgements_per_battle,
                                         status=WorkUnit.Status.DONE) for battle in battles])
        leases, choices = [], []
        for unit, battle in zip(units, battles, strict=True):
            for worker in rng.sample(workers, judgements_per_battle):
                leases.append(Assignment(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                         leased_at=now, lease_expires_at=now, submitted_at=now))
                choices.append((battle, worker, rng.choice("ab"), rng.choice(["left", "right"])))
        leases = bulk(Assignment, leases)
        bulk(HumanJudgement, [HumanJudgement(battle=battle, tournament_id=battle.tournament_id, worker=worker,
                                             assignment=lease, shown_left=shown_left, choice=choice)
                              for (battle, worker, shown_left, choice), lease in zip(choices, leases, strict=True)])
        for run in runs:
            bulk(JudgeJudgement, [JudgeJudgement(run=run, battle=battle, ordering=ordering, winner=rng.choice("ab"),
                                       cot="Overall, Response A is better.")
                             for battle in battles for ordering in ("ab", "ba")])
    calls = 2 * Battle.objects.filter(tournament=tournament).count()
    JudgeRun.objects.filter(tournament=tournament).update(total_calls=calls, done_calls=calls)
    return tournament
