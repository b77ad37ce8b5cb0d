"""Tournaments (paper §4; CHIRP Appendix C.2): battles of two responses to one instance,
sampled from the imported predictions and the verified references, and launched into the crowd
work queue."""

import itertools
import random

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from annotation.crowdwork.answers import settle_unit
from annotation.crowdwork.stages import create_work_units
from annotation.crowdwork.stopping import ask_what_is_needed
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
from annotation.preferences.judgements import HUMAN_JUDGEMENTS
from crowdbench.events import emit


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


def _pairs_by_instance(tournament):
    """Per eligible instance with two or more of the tournament's responses, every unordered pair
    of them (in a stable order)."""
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

    return [
        list(itertools.combinations(by_instance[i.pk], 2))
        for i in instances
        if len(by_instance.get(i.pk, ())) >= 2
    ]


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
    pairs_by_instance = _pairs_by_instance(tournament)
    rng = random.Random(tournament.seed)
    Sampling = Tournament.Sampling
    if tournament.sampling == Sampling.ALL_PAIRS:
        chosen = [pair for pairs in pairs_by_instance for pair in pairs]
    elif tournament.sampling == Sampling.ACTIVE:
        if tournament.battle_count < 1 or tournament.battles_per_round < 1:
            raise AnnotationError("Active sampling needs a number of battles and battles per round of at least 1.")
        chosen = _active_round_pairs(tournament, pairs_by_instance, round_number=1, battles=None)
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


def _model_pair(first, second):
    return tuple(sorted((first.model_name, second.model_name)))


def _active_round_pairs(tournament, pairs_by_instance, *, round_number, battles):
    """One round of active sampling's (response, response) pairs: each drawn by the rule of
    annotation/scoring/active.py from `battles` (the counted judgements so far; None for the first
    round, which is balanced: every model in as many battles as the others), on an instance where
    that pair of models has no battle yet. The draw depends only on the tournament's seed, the round number and the
    judgements, so making a round again draws the same battles."""
    # Here, so that the admin's pages which import this module do not load the scientific stack.
    import numpy as np

    from annotation.scoring.active import balanced_pairs, draw_pairs, pair_weights

    taken = {(battle.instance_id, _model_pair(battle.response_a, battle.response_b))
             for battle in tournament.battles.select_related("response_a", "response_b")}
    rng = np.random.default_rng([tournament.seed, round_number])
    candidates = {}
    for pairs in pairs_by_instance:
        for first, second in pairs:
            key = _model_pair(first, second)
            if (first.instance_id, key) not in taken:
                candidates.setdefault(key, []).append((first, second))
    for options in candidates.values():
        rng.shuffle(options)
    size = min(tournament.battles_per_round, tournament.battle_count - len(taken))
    if battles is None:
        available = {pair: len(options) for pair, options in sorted(candidates.items())}
        return [candidates[pair].pop() for pair in balanced_pairs(available, size, rng)]
    models = sorted({model for key in candidates for model in key})
    weights = {pair: weight for pair, weight in pair_weights(battles, models, seed=round_number).items()
               if pair in candidates}
    chosen = []
    while weights and len(chosen) < size:
        (pair,) = draw_pairs(weights, 1, rng)
        chosen.append(candidates[pair].pop())
        if not candidates[pair]:
            del weights[pair]
    return chosen


def current_round(tournament):
    """The latest round of the tournament's battles (0 before any)."""
    return tournament.battles.aggregate(latest=Max("round"))["latest"] or 0


def round_due(tournament):
    """Whether an active tournament is owed its next round: launched, short of its battles, and
    every battle drawn so far answered (its unit closed)."""
    if tournament.sampling != Tournament.Sampling.ACTIVE or tournament.launched_at is None:
        return False
    made = tournament.battles.count()
    if not made or made >= tournament.battle_count:
        return False
    return not tournament.battles.exclude(
        work_units__status__in=(WorkUnit.Status.DONE, WorkUnit.Status.CANCELLED)).exists()


def make_next_round(*, tournament_id):
    """Draw and launch an active tournament's next round when it is due; returns how many
    battles were made. The tournament's row is locked while the round is drawn, and the round
    is due only while every battle so far is answered, so a second call (a redelivered job, two
    sweeps) finds the new round open and makes nothing."""
    from annotation.scoring.battles import human_battles

    with transaction.atomic():
        tournament = Tournament.objects.select_for_update().filter(pk=tournament_id).first()
        if tournament is None or not round_due(tournament):
            return 0
        round_number = current_round(tournament) + 1
        chosen = _active_round_pairs(tournament, _pairs_by_instance(tournament), round_number=round_number,
                                     battles=human_battles(tournament=tournament))
        rng = random.Random(f"{tournament.seed}:{round_number}")
        battles = []
        for first, second in chosen:
            a, b = (second, first) if rng.random() < 0.5 else (first, second)
            battles.append(Battle(tournament=tournament, instance_id=a.instance_id, response_a=a, response_b=b,
                                  round=round_number))
        Battle.objects.bulk_create(battles)
        if battles:
            launch_tournament(tournament=tournament)
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
            emit(event="stage.launched", scope=tournament, key=f"tournament-{tournament.pk}",
                 payload={"tournament": tournament.pk, "stage": Stage.PAIRWISE, "families": [f.pk for f in families]})
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
        done = sum(settle_unit(unit, HUMAN_JUDGEMENTS)[0] for unit in WorkUnit.objects.filter(pk__in=resized))
    return len(resized), done
