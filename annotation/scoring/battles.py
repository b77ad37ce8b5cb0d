"""Battles as the rating and agreement functions beside this module take them.

A battles frame has one row per decided battle: `model_a`, `model_b`, `winner` (model_a, model_b
or tie), and `instruction_category` (the family), `question_id` (the instance), `is_multi_image`,
`judge`, `criterion` and `battle_id`. Human battles have a row per worker's judgement; a judge's
battles have a row per battle, its orderings combined by the VisIT-Bench tie rule.
"""

import pandas as pd
from django.db.models import Count

from annotation.judging.parsing import combine_orderings
from annotation.models import (
    HumanJudgement,
    InstanceImage,
    JudgeJudgement,
    JudgeRun,
    Side,
)
from annotation.scoring.rubrics import rubric_criterion

HUMAN_JUDGE = "human"
BATTLE_COLUMNS = [
    "model_a",
    "model_b",
    "winner",
    "instruction_category",
    "question_id",
    "is_multi_image",
    "judge",
    "criterion",
    "battle_id",
    "response_a_len",
    "response_b_len",
]
# `rubric`: the criterion of the rubric the score was given against (scoring/rubrics.py).
SCORE_COLUMNS = ["model", "question_id", "instruction_category", "is_multi_image", "judge", "rubric",
                 "score"]
_WINNER = {
    JudgeJudgement.Winner.A: "model_a",
    JudgeJudgement.Winner.B: "model_b",
    JudgeJudgement.Winner.TIE: "tie",
}
_VERDICT = {side: winner for winner, side in _WINNER.items()}


def _frame(rows, columns):
    return pd.DataFrame(rows, columns=columns)


def _battle_fields(battle, multi_image_by_instance):
    instance = battle.instance
    return {
        "model_a": battle.response_a.model_name,
        "model_b": battle.response_b.model_name,
        "instruction_category": instance.family.name,
        "question_id": instance.pk,
        "is_multi_image": multi_image_by_instance[instance.pk],
        "battle_id": battle.pk,
        # Non-whitespace tokens, the length baseline of VisIT-Bench §4.3.
        "response_a_len": len(battle.response_a.text.split()),
        "response_b_len": len(battle.response_b.text.split()),
    }


def _multi_image(battles):
    """Instance.is_multi_image by instance, with the images counted in one query (a prefetch per
    instance object cost half the loading time of a large tournament's battles)."""
    families = {battle.instance_id: battle.instance.family.is_multi_image for battle in battles}
    several = set(
        InstanceImage.objects.filter(instance_id__in=[pk for pk, multi in families.items() if not multi])
        .values("instance_id").annotate(images=Count("id")).filter(images__gt=1)
        .values_list("instance_id", flat=True)
    )
    return {pk: multi or pk in several for pk, multi in families.items()}


def _battle_related(queryset, prefix):
    return queryset.select_related(f"{prefix}instance__family", f"{prefix}response_a", f"{prefix}response_b")


def human_battles(*, tournament, criterion="overall"):
    """One row per worker's judgement, the shown side mapped back to model_a / model_b.

    For a CHIRP criterion other than overall, only judgements that answered it count.
    """
    judgements = list(
        _battle_related(
            HumanJudgement.objects.counted().filter(tournament=tournament).order_by("id"), "battle__"
        )
    )
    flags = _multi_image([j.battle for j in judgements])
    rows = []
    for judgement in judgements:
        side = judgement.choice if criterion == "overall" else judgement.criteria.get(criterion)
        if side not in Side.values:
            continue
        rows.append(
            {
                **_battle_fields(judgement.battle, flags),
                "winner": judgement.winner_side(side),
                "judge": HUMAN_JUDGE,
                "criterion": criterion,
            }
        )
    return _frame(rows, BATTLE_COLUMNS)


def _run_judgements(run, criterion):
    judgements = list(
        _battle_related(
            JudgeJudgement.objects.counted().filter(run=run, criterion=criterion).order_by("battle_id", "ordering"),
            "battle__",
        )
    )
    return judgements, _multi_image([j.battle for j in judgements])


def judge_battles(*, run, criterion="overall", orderings=None):
    """One row per battle the run judged, its orderings combined: more wins, else a tie
    (judging/parsing.py combine_orderings). From the run's `orderings` (judge_orderings) when the
    caller has read them already: reading a large run's judgements is most of the work."""
    if orderings is None:
        orderings = judge_orderings(run=run, criterion=criterion)
    verdicts = {}
    for battle_id, winner in zip(orderings["battle_id"], orderings["winner"], strict=True):
        verdicts.setdefault(battle_id, []).append(_VERDICT[winner])
    combined = {battle_id: _WINNER[combine_orderings(found)] for battle_id, found in verdicts.items()}
    battles = orderings.drop_duplicates("battle_id").reset_index(drop=True)
    return battles.assign(winner=battles["battle_id"].map(combined).astype(orderings["winner"].dtype))[BATTLE_COLUMNS]


def judge_orderings(*, run, criterion="overall"):
    """One row per judgement, each ordering on its own (the agreement measures want both), with
    `ordering`: "ab" when A was shown first, "ba" when B was (the judge report's position bias)."""
    judgements, flags = _run_judgements(run, criterion)
    rows = [
        {
            **_battle_fields(j.battle, flags),
            "winner": _WINNER[j.winner],
            "judge": run.judge_name,
            "criterion": criterion,
            "ordering": j.ordering,
        }
        for j in judgements
    ]
    return _frame(rows, [*BATTLE_COLUMNS, "ordering"])


def finished_runs(*, tournament):
    return list(JudgeRun.objects.filter(tournament=tournament, status=JudgeRun.Status.DONE).order_by("id"))


def _rubric_criteria(tournament):
    """The criterion of the rubric each instance is scored against, by instance."""
    rubric_for = tournament.rubric_finder()
    found = {}

    def criterion(instance):
        if instance.pk not in found:
            found[instance.pk] = rubric_criterion(rubric_for(instance))
        return found[instance.pk]

    return criterion


def human_rubric_scores(*, tournament):
    """One row per (worker's judgement, response) with its 1-5 rubric score.

    The worker scored the responses by the side they were shown on (`rubric_scores` is keyed
    left / right); `winner_side` maps a side to model_a or model_b as it does for the choice.
    """
    judgements = _battle_related(
        HumanJudgement.objects.counted().filter(tournament=tournament).exclude(rubric_scores={}), "battle__"
    )
    judgements = list(judgements)
    flags = _multi_image([j.battle for j in judgements])
    criterion = _rubric_criteria(tournament)
    rows = []
    for judgement in judgements:
        fields = _battle_fields(judgement.battle, flags)
        for side, score in judgement.rubric_scores.items():
            model = fields[judgement.winner_side(side)]
            rows.append(
                {
                    "model": model,
                    "question_id": fields["question_id"],
                    "instruction_category": fields["instruction_category"],
                    "is_multi_image": fields["is_multi_image"],
                    "judge": HUMAN_JUDGE,
                    "rubric": criterion(judgement.battle.instance),
                    "score": score,
                }
            )
    return _frame(rows, SCORE_COLUMNS)


def judge_rubric_scores(*, run):
    """One row per (battle, response) a Prometheus run scored."""
    judgements = list(
        _battle_related(
            JudgeJudgement.objects.counted().filter(run=run, score_a__isnull=False, score_b__isnull=False),
            "battle__",
        )
    )
    flags = _multi_image([j.battle for j in judgements])
    criterion = _rubric_criteria(run.tournament)
    rows = []
    for judgement in judgements:
        fields = _battle_fields(judgement.battle, flags)
        for model, score in (
            (fields["model_a"], judgement.score_a),
            (fields["model_b"], judgement.score_b),
        ):
            rows.append(
                {
                    "model": model,
                    "question_id": fields["question_id"],
                    "instruction_category": fields["instruction_category"],
                    "is_multi_image": fields["is_multi_image"],
                    "judge": run.judge_name,
                    "rubric": criterion(judgement.battle.instance),
                    "score": score,
                }
            )
    # A response meets several opponents but is scored once: the request, hence the answer, is
    # the same (and was cached), so one row per response.
    return _frame(rows, SCORE_COLUMNS).drop_duplicates(["model", "question_id"], ignore_index=True)
