"""Tournaments (paper §4; CHIRP Appendix C.2): battles of two responses to one instance,
sampled from the imported predictions and the verified references, and launched into the crowd
work queue."""

import itertools
import random

from django.db import transaction
from django.utils import timezone

from annotation.collection.decisions import settle_unit
from annotation.collection.stages import create_work_units
from annotation.exceptions import AnnotationError
from annotation.models import (
    REFERENCE_MODEL_NAME,
    Battle,
    InstructionFamily,
    ModelResponse,
    Stage,
    StageConfig,
    Tournament,
    WorkUnit,
)
from annotation.preferences.answers import owed_answers_message
from annotation.preferences.eligible import eligible_instances
from annotation.stopping import ask_what_is_needed


def reference_responses(*, instances):
    """The verified reference of each instance as a ModelResponse (created once, then reused)."""
    existing = set(
        ModelResponse.objects.filter(
            instance__in=instances, model_name=REFERENCE_MODEL_NAME
        ).values_list("instance_id", flat=True)
    )
    ModelResponse.objects.bulk_create(
        [
            ModelResponse(
                instance=i,
                model_name=REFERENCE_MODEL_NAME,
                text=i.reference_output,
                imported_from="verified reference",
            )
            for i in instances
            if i.pk not in existing and i.reference_output.strip()
        ],
        ignore_conflicts=True,
    )


def sample_battles(*, tournament):
    """Sample the tournament's battles, the same ones for the same seed; returns how many were made.

    Pairs are drawn as unordered pairs of responses to one instance; which one is A is drawn too,
    so no model is always shown as A to the judges.
    """
    if tournament.battles.exists():
        raise AnnotationError(f"“{tournament.name}” already has its battles.")
    if tournament.launched_at:
        raise AnnotationError(f"“{tournament.name}” is launched; its battles can no longer change.")
    # An endpoint model's answers must be in before the draw: battles are never drawn again.
    owed = owed_answers_message(tournament)
    if owed:
        raise AnnotationError(owed)
    instances = eligible_instances(tournament)
    if tournament.include_reference:
        reference_responses(instances=instances)
    responses = ModelResponse.objects.filter(instance__in=instances).order_by(
        "instance_id", "model_name"
    )
    if tournament.model_names:
        wanted = set(tournament.model_names) | set(
            tournament.endpoint_models.values_list("model_name", flat=True)) | (
            {REFERENCE_MODEL_NAME} if tournament.include_reference else set()
        )
        responses = responses.filter(model_name__in=wanted)
    elif not tournament.include_reference:
        responses = responses.exclude(model_name=REFERENCE_MODEL_NAME)
    by_instance = {}
    for response in responses:
        by_instance.setdefault(response.instance_id, []).append(response)

    rng = random.Random(tournament.seed)
    pairs_by_instance = [
        list(itertools.combinations(by_instance[i.pk], 2))
        for i in instances
        if len(by_instance.get(i.pk, ())) >= 2
    ]
    Sampling = Tournament.Sampling
    if tournament.sampling == Sampling.ALL_PAIRS:
        chosen = [pair for pairs in pairs_by_instance for pair in pairs]
    elif tournament.sampling == Sampling.K_MATCHUPS:
        if tournament.matchups_per_question < 1:
            raise AnnotationError("k matchups per question must be at least 1.")
        chosen = [
            pair
            for pairs in pairs_by_instance
            for pair in rng.sample(pairs, min(tournament.matchups_per_question, len(pairs)))
        ]
    else:
        if tournament.battle_count < 1:
            raise AnnotationError("Uniform sampling needs a number of battles of at least 1.")
        pool = [pair for pairs in pairs_by_instance for pair in pairs]
        chosen = sorted(
            rng.sample(pool, min(tournament.battle_count, len(pool))),
            key=lambda pair: (pair[0].instance_id, pair[0].model_name, pair[1].model_name),
        )
    if not chosen:
        raise AnnotationError(
            f"“{tournament.name}” has nothing to compare: no verified instance with two or more "
            "responses matches its families, image kind and models. Import predictions first."
        )
    battles = []
    for first, second in chosen:
        a, b = (second, first) if rng.random() < 0.5 else (first, second)
        battles.append(Battle(tournament=tournament, instance_id=a.instance_id, response_a=a, response_b=b))
    Battle.objects.bulk_create(battles)
    return len(battles)


def launch_tournament(*, tournament):
    """Put every battle of the tournament in the work queue, `judgements_per_pair` workers each."""
    if not tournament.battles.exists():
        raise AnnotationError(f"“{tournament.name}” has no battles to launch; sample them first.")
    now = timezone.now()
    with transaction.atomic():
        families = list(InstructionFamily.objects.filter(instances__battles__tournament=tournament).distinct())
        # The queue offers a stage's units of a family only while that family's stage is launched.
        for family in families:
            config, _ = StageConfig.objects.get_or_create(
                family=family,
                stage=Stage.PAIRWISE,
                defaults={
                    "overlap": tournament.judgements_per_pair,
                    "lease_minutes": tournament.lease_minutes,
                },
            )
            if config.launched_at is None:
                config.launched_at = now
                config.save(update_fields=["launched_at"])
        if tournament.launched_at is None:
            tournament.launched_at = now
            tournament.save(update_fields=["launched_at"])
        for family in families:
            create_work_units(family=family, stage=Stage.PAIRWISE)
    return tournament


def apply_judgements_per_pair(*, tournament):
    """A changed number of judgements per battle, or a changed ask until decided, reaches the
    tournament's open battles: (how many now ask for a new number, how many of those already had
    enough and are done)."""
    with transaction.atomic():
        units = WorkUnit.objects.filter(stage=Stage.PAIRWISE, battle__tournament=tournament,
                                        status=WorkUnit.Status.OPEN)
        if tournament.adaptive:
            resized = []
            for unit in units.select_for_update(of=("self",)).select_related("battle__tournament"):
                before = unit.overlap
                # The tournament in hand holds the new settings, whether or not they are saved yet.
                unit.battle.tournament = tournament
                if ask_what_is_needed(unit) != before:
                    resized.append(unit.pk)
        else:
            resized = list(units.exclude(overlap=tournament.judgements_per_pair).values_list("pk", flat=True))
            WorkUnit.objects.filter(pk__in=resized).update(overlap=tournament.judgements_per_pair)
        done = sum(settle_unit(unit)[0] for unit in WorkUnit.objects.filter(pk__in=resized))
    return len(resized), done
