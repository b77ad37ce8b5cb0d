"""The background jobs of the figures researchers read: the leaderboard (a thin wrapper that loads
a tournament and calls annotation/scoring/freshness.py for each board, under a lease per board),
and the stage's median time the worker page sets each worker's beside."""

from django.contrib.auth import get_user_model

from annotation import worker_report
from annotation.models import Tournament
from annotation.scoring import freshness, stored_figures
from crowdbench.celery import app
from crowdbench.jobs import enqueue
from tasks.jobs import JOB_OPTIONS, lease


def board_lease(criterion, rounds):
    return f"leaderboard:{criterion}:{rounds}"


@app.task(name=freshness.JOB, **JOB_OPTIONS)
def refresh_leaderboard_job(tournament_id, criterion=None, rounds=None):
    """Every board the tournament keeps current, or the one named."""
    tournament = Tournament.objects.filter(pk=tournament_id).first()
    if tournament is None:
        return 0
    boards = [(criterion, rounds)] if criterion else freshness.kept_boards(tournament)
    computed = 0
    for criterion, rounds in boards:
        with lease(board_lease(criterion, rounds), tournament_id) as mine:
            if mine:
                stored = freshness.refresh_leaderboard(tournament=tournament, criterion=criterion, rounds=rounds)
                # The figures too, here rather than in the request that first shows them.
                stored_figures.draw_all(stored)
                computed += 1
        # A copy queued by a change made while this one computed exited at the lease; the change is
        # caught here, after the lease is let go, or it would wait for the next one.
        if mine and not freshness.leaderboard_is_current(tournament=tournament, criterion=criterion, rounds=rounds):
            enqueue(freshness.JOB, tournament_id, criterion, rounds)
    return computed


@app.task(name=worker_report.STAGE_MEDIAN_JOB, **JOB_OPTIONS)
def keep_stage_median_job(stage, user_id):
    """The whole stage's median in the scope of the user whose page found it stale (None: the rows
    of no group)."""
    user = None if user_id is None else get_user_model().objects.filter(pk=user_id).first()
    if user_id is not None and user is None:
        return None
    worker_report.keep_stage_median(stage, user)
    return stage
