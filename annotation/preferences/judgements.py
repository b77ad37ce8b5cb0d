"""The crowd's pairwise judgements: a battle shown with its sides drawn per assignment, and a
worker's forced choice (with CHIRP's criteria and rubric scores where the tournament asks for them)
stored once."""

import random

from annotation.crowdwork.answers import StageAnswers, submit_answer
from annotation.exceptions import AnnotationError
from annotation.models import (
    CHIRP_CRITERIA,
    Battle,
    HumanJudgement,
    Side,
    Stage,
    Tournament,
    WorkUnit,
)
from crowdbench.jobs import enqueue

RUBRIC_SCORES = range(1, 6)


def battle_of(unit):
    """The unit's battle with its tournament, instance and responses: the ones the queue fetched
    with the unit when it did (its instance is the unit's, images included), else one query."""
    if WorkUnit._meta.get_field("battle").is_cached(unit) and unit.battle is not None:
        battle = unit.battle
        if unit.instance_id == battle.instance_id and WorkUnit._meta.get_field("instance").is_cached(unit):
            battle.instance = unit.instance
        return battle
    return Battle.objects.select_related("tournament", "instance", "response_a", "response_b").get(
        pk=unit.battle_id
    )


def shown_left_for(*, assignment, tournament):
    """Which response this assignment shows on the left, drawn once per assignment.

    Drawn from the tournament seed and the assignment, so a reload shows the same sides and the
    worker's choice is read against what they saw, never against what the browser claims.
    """
    rng = random.Random(f"{tournament.seed}:{assignment.pk}")
    return HumanJudgement.ShownLeft.A if rng.random() < 0.5 else HumanJudgement.ShownLeft.B


def pairwise_task(*, assignment=None, unit=None):
    """What the worker sees: the battle, and its responses on their shown sides.

    Without an assignment (an MTurk preview, where nothing is leased) A is shown on the left.
    """
    battle = battle_of(assignment.unit if assignment is not None else unit)
    shown_left = (
        shown_left_for(assignment=assignment, tournament=battle.tournament)
        if assignment is not None
        else HumanJudgement.ShownLeft.A
    )
    left, right = (
        (battle.response_a, battle.response_b)
        if shown_left == HumanJudgement.ShownLeft.A
        else (battle.response_b, battle.response_a)
    )
    return {
        "battle": battle,
        "shown_left": shown_left,
        "left": left,
        "right": right,
        "criteria": CHIRP_CRITERIA[1:] if battle.tournament.with_criteria else (),
        "rubric": battle.tournament.rubric_for(battle.instance).strip() if battle.tournament.with_rubric else "",
    }


def _check_side(value, what):
    if value not in Side.values:
        raise AnnotationError(f"Please choose the left or the right response for {what}.")
    return value


def _clean_criteria(tournament, criteria):
    criteria = dict(criteria or {})
    if not tournament.with_criteria:
        if criteria:
            raise AnnotationError("This tournament asks only for an overall preference.")
        return {}
    unknown = set(criteria) - set(CHIRP_CRITERIA[1:])
    if unknown:
        raise AnnotationError(f"Unknown criteria: {', '.join(sorted(unknown))}.")
    return {
        name: _check_side(criteria.get(name), name.replace("_", " ")) for name in CHIRP_CRITERIA[1:]
    }


def _clean_rubric_scores(tournament, scores, *, rubric):
    """The two 1-5 scores when the worker was shown a rubric (`rubric`: its text for this battle's
    instance); a rubric tournament whose rubric is empty asks for none, so it never blocks anybody."""
    scores = dict(scores or {})
    if not tournament.with_rubric or not (rubric or "").strip():
        if scores:
            raise AnnotationError("This tournament does not ask for rubric scores.")
        return {}
    cleaned = {}
    for side in Side.values:
        try:
            score = int(scores.get(side))
        except (TypeError, ValueError):
            score = None
        if score not in RUBRIC_SCORES:
            raise AnnotationError(f"Please score the {side} response from 1 to 5.")
        cleaned[side] = score
    return cleaned


def submit_pairwise_judgement(
    *, assignment_id, worker, choice, criteria=None, rubric_scores=None, active_seconds=None
):
    """A worker's forced choice on a battle (and CHIRP criteria, rubric scores if the tournament asks).

    Submitting the same assignment again returns the judgement already stored.
    """
    _check_side(choice, "your overall preference")

    def store(assignment):
        battle = battle_of(assignment.unit)
        tournament = battle.tournament
        judgement = HumanJudgement.objects.create(
            battle=battle,
            worker=worker,
            assignment=assignment,
            shown_left=shown_left_for(assignment=assignment, tournament=tournament),
            choice=choice,
            criteria=_clean_criteria(tournament, criteria),
            rubric_scores=_clean_rubric_scores(tournament, rubric_scores,
                                               rubric=tournament.rubric_for(battle.instance)),
            active_seconds=active_seconds,
        )
        # The leaderboard is computed in the background (annotation/scoring/freshness.py).
        enqueue("tasks.refresh_leaderboard", tournament.pk)
        return judgement

    return submit_answer(answers=HUMAN_JUDGEMENTS, assignment_id=assignment_id, worker=worker, store=store,
                         active_seconds=active_seconds)


def ask_for_next_round(tournament):
    """An active tournament's next round may be due once a battle is closed: its job decides (and
    makes nothing while battles are open); the outbox sweep sends it again if it is lost."""
    if tournament.sampling == Tournament.Sampling.ACTIVE:
        enqueue("tasks.next_battle_round", tournament.pk)


def _next_round_once_closed(unit, closed):
    if closed and unit.battle_id is not None:
        ask_for_next_round(unit.battle.tournament)


HUMAN_JUDGEMENTS = StageAnswers(stage=Stage.PAIRWISE, stored="human_judgement", author="worker_id",
                                settle=_next_round_once_closed)
