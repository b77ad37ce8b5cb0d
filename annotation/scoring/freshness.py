"""Whether a tournament's stored leaderboard is current, and how the next one is asked for and made.

The leaderboard (leaderboard.py) is computed by a background job, `tasks.refresh_leaderboard`,
never in a web request: with 15 models and a crowd of spammers its bootstraps and agreement
measures take seconds to minutes. Pages, the API and the `leaderboard` command show the last
stored result with its age, and say "computing" while it is older than the judgements.

"Older than the judgements" is decided by a fingerprint taken in SQL, without loading a row: counts,
id checksums and latest changes of everything a result is computed from (see `fingerprint`). Every
change that can alter a result changes it: a judgement submitted, edited or deleted, a review that
accepts or rejects one or any other change of its work state (the tournament may count only
accepted work), an instance verified or un-verified (battles count only while their instance is
verified, `counted_battles`), a model response's text edited (the judge report counts its tokens),
a judge run finishing or run again, and the tournament's, its rubrics' and the families' settings.

Jobs are queued when judgements change, by the services that change them (a judgement submitted,
a review, an instance verified or un-verified, a judge run finished or run again: they name the job
by its Celery name, as the domain does every job), by a page that finds its result stale, and by
the outbox sweep (tasks/outbox.py) for a change whose job was lost. Queuing one twice costs a
message: the job runs under a lease per board, and a state already stored (one row per state:
LeaderboardResult's unique constraint) is not computed again.
"""

import hashlib
import time
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Max, Sum
from django.utils import timezone

from annotation.models import (
    CHIRP_CRITERIA,
    REFERENCE_MODEL_NAME,
    Battle,
    HumanJudgement,
    JudgeJudgement,
    JudgeRun,
    LeaderboardResult,
    ModelResponse,
    Tournament,
    WorkState,
)
from annotation.models.benchmark import benchmark_instances
from annotation.scoring import DEFAULT_ROUNDS
from crowdbench.jobs import enqueue

JOB = "tasks.refresh_leaderboard"
# Bump when the computation or the stored layout changes, so older stored results are not current.
COMPUTATION_VERSION = 9
# A second checksum of the ids beside their sum: two rows deleted and two others made between two
# computations keep count and sum equal only by a coincidence this breaks (the squares modulo a
# prime, which stays within a 64-bit sum at any realistic size).
_CHECKSUM_PRIME = 1_000_003


def kept_boards(tournament):
    """(criterion, rounds) of every board a job keeps current: overall at the dashboard's rounds,
    each CHIRP criterion where the tournament asks them, and any board someone asked for (the
    API's `rounds`)."""
    boards = {("overall", DEFAULT_ROUNDS)}
    if tournament.with_criteria:
        boards |= {(criterion, DEFAULT_ROUNDS) for criterion in CHIRP_CRITERIA}
    boards |= set(LeaderboardResult.objects.filter(tournament=tournament).values_list("criterion", "rounds"))
    return sorted(boards)


def _id_checksum(where=None, prefix=""):
    """Aggregates of the ids of a set of rows (those `where` selects, or all) that change when a row
    comes or goes."""
    return {
        f"{prefix}n": Count("id", filter=where),
        f"{prefix}sum": Sum("id", filter=where),
        f"{prefix}squares": Sum(F("id") * F("id") % _CHECKSUM_PRIME, filter=where),
    }


def _set_checksum():
    """Aggregates of a set of rows that change when a row comes or goes, and when any row is
    edited (or, for a human judgement, reviewed)."""
    return {**_id_checksum(), "last": Max("id"), "edited": Max("updated_at")}


def _left_out_by_work_state(tournament, counts_provisional):
    """Checksums of the tournament's human judgements that their work state leaves out: the rejected
    ones, or where only accepted work counts, every one not accepted. A review stamps the judgement
    whose state it changes (annotation/crowdwork/review.py), but a state changed any other way (an update in
    the shell, a data migration) stamps nothing, so the states are read; these judgements are few,
    found through the index on the work state, where reading every judgement's state tripled the
    fingerprint's time."""
    # counted_work's complement, said as the states it leaves out so that the index can find them.
    left_out = [WorkState.REJECTED] if counts_provisional else [WorkState.PROVISIONAL, WorkState.REJECTED]
    return (HumanJudgement.objects.filter(tournament=tournament, assignment__work_state__in=left_out)
            .aggregate(**_id_checksum()))


def fingerprint(*, tournament, criterion="overall", rounds=DEFAULT_ROUNDS):
    """sha256 of what the board's result depends on, from a few aggregate queries."""
    settings = Tournament.objects.values_list("seed", "counts_provisional", "with_rubric", "rubric",
                                              "aggregation").get(pk=tournament.pk)
    # Which of them count (counted_work, counted_battles) is read from the work states of their
    # assignments and whether their battles' instances are in the benchmark, as well as from the stamps a review
    # and a verification leave (annotation/crowdwork/review.py, collection/verification.py).
    human = HumanJudgement.objects.filter(tournament=tournament).aggregate(**_set_checksum())
    left_out = _left_out_by_work_state(tournament, counts_provisional=settings[1])
    judge = JudgeJudgement.objects.filter(run__tournament=tournament, run__status=JudgeRun.Status.DONE).aggregate(
        **_set_checksum())
    runs = list(JudgeRun.objects.filter(tournament=tournament, status=JudgeRun.Status.DONE).order_by("id")
                .values_list("id", "engine", "mode", "finished_at"))
    battles = Battle.objects.filter(tournament=tournament).aggregate(
        n=Count("id"), last=Max("id"), instances=Max("instance__updated_at"))
    # Which battles count follows which of their instances are in the benchmark: those instances'
    # ids, asked of the tournament's instances alone. Asked of every battle, PostgreSQL decided the
    # whole benchmark (100,000 instances) once per aggregate, 1.0-1.4 s of every leaderboard view.
    in_benchmark = benchmark_instances().filter(
        pk__in=Battle.objects.filter(tournament=tournament).values("instance_id")).order_by().aggregate(
        **_id_checksum(prefix="verified_"))
    # The last edit of a response to the tournament's instances (the judge report counts the tokens
    # of those in battles): one semi-join, where reading both responses of every battle cost five
    # times the battles' own aggregate.
    responses = ModelResponse.objects.filter(
        instance_id__in=Battle.objects.filter(tournament=tournament).values("instance_id")).aggregate(
        edited=Max("updated_at"))
    # A family's name is a category of the board, and its flag says whether its instances are multi-image.
    # In one pass over the battles and their instances: as a subquery of the families PostgreSQL
    # read every battle once per family (0.25 s at 50 families and 12,500 battles).
    families = sorted(set(Battle.objects.filter(tournament=tournament).order_by().values_list(
        "instance__family_id", "instance__family__name", "instance__family__is_multi_image").distinct()))
    rubrics = list(tournament.rubrics.order_by("id").values_list("family_id", "instance_id", "text"))
    parts = (COMPUTATION_VERSION, criterion, rounds, REFERENCE_MODEL_NAME, settings, human, left_out, judge, runs,
             battles, in_benchmark, responses, families, rubrics)
    return hashlib.sha256(repr(parts).encode()).hexdigest()


@contextmanager
def _one_snapshot():
    """One view of the data for the fingerprint and the rows, so a result never carries the key of
    a state it was not computed from (REPEATABLE READ on PostgreSQL; SQLite's transactions are
    serializable)."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if connection.vendor == "postgresql" and outermost:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def _stored_or_evaluators(tournament, criterion, rounds):
    """(tournament, board, key, stored, evaluators) of a board for the judgements as they are now,
    read in one snapshot: its result stored under that fingerprint, or else (stored None) the
    evaluators to compute it from."""
    from annotation.scoring import leaderboard

    tournament = Tournament.objects.get(pk=tournament.pk)
    board = {"tournament": tournament, "criterion": criterion, "rounds": rounds}
    with _one_snapshot():
        key = fingerprint(tournament=tournament, criterion=criterion, rounds=rounds)
        stored = LeaderboardResult.objects.filter(**board, data_key=key).first()
        found = None if stored is not None else leaderboard.evaluators(tournament=tournament, criterion=criterion)
    return tournament, board, key, stored, found


def refresh_leaderboard(*, tournament, criterion="overall", rounds=DEFAULT_ROUNDS):
    """The job's work: store the board's result for the judgements as they are now, unless it is
    stored already. Returns the stored LeaderboardResult. Results older than the one before it are
    dropped."""
    from annotation.scoring import leaderboard, stored_figures

    tournament, board, key, stored, found = _stored_or_evaluators(tournament, criterion, rounds)
    if stored is not None:
        return stored
    started = time.perf_counter()
    result = leaderboard.compute(found, seed=tournament.seed, rounds=rounds)
    seconds = time.perf_counter() - started
    try:
        with transaction.atomic():
            stored = LeaderboardResult.objects.create(
                **board, data_key=key, result=result, seconds=seconds,
                judgements=sum(evaluator.judgements for evaluator in found))
    except IntegrityError:
        # The command computed the same state meanwhile; the numbers are the same.
        stored = LeaderboardResult.objects.get(**board, data_key=key)
    # The result before this one stays: a page rendered from it a moment ago still draws its figures
    # from it (frontend/dashboard.py names each figure by its result), so table and plot never differ.
    previous = (LeaderboardResult.objects.filter(**board, computed_at__lt=stored.computed_at)
                .order_by("-computed_at", "-id").values_list("computed_at", flat=True).first())
    if previous is not None:
        dropped = LeaderboardResult.objects.filter(**board, computed_at__lt=previous)
        data_keys = list(dropped.values_list("data_key", flat=True))
        dropped.delete()
        stored_figures.forget(tournament.pk, data_keys)
    return stored


def tournament_judge_report(*, tournament, criterion="overall", rounds=DEFAULT_ROUNDS):
    """The judge report alone, as JSON-ready data (the snapshot's judge_report.json): the one the
    leaderboard's stored result holds for the judgements as they are now, so the snapshot's report
    and the leaderboard's never differ. It only reads, since a snapshot is built in a read-only
    transaction: the build stores each board first (`refresh_leaderboard`), and a report whose
    judgements changed between the two is computed here by the same code and not stored."""
    from annotation.scoring import leaderboard

    tournament, _, _, stored, found = _stored_or_evaluators(tournament, criterion, rounds)
    if stored is not None:
        return stored.result["judge_report"]
    return leaderboard.compute(found, seed=tournament.seed, rounds=rounds)["judge_report"]


def latest_stored(*, tournament, criterion="overall", rounds=DEFAULT_ROUNDS):
    return (LeaderboardResult.objects.filter(tournament=tournament, criterion=criterion, rounds=rounds)
            .order_by("-computed_at", "-id").first())


@dataclass
class LeaderboardState:
    """What a page shows of a board: the last stored result (None before the first), and whether it
    is current or a newer one is being computed (or queued)."""

    stored: LeaderboardResult | None
    current: bool

    @property
    def computing(self):
        return not self.current

    @property
    def age_seconds(self):
        return None if self.stored is None else max(0.0, (timezone.now() - self.stored.computed_at).total_seconds())

    @property
    def status(self):
        return "current" if self.current else "computing"

    @property
    def result(self):
        """The stored result as the pages read it."""
        from annotation.scoring.leaderboard_display import TournamentLeaderboard

        return None if self.stored is None else TournamentLeaderboard.from_stored(self.stored)


def _is_current(stored, *, tournament, criterion, rounds):
    return stored is not None and stored.data_key == fingerprint(tournament=tournament, criterion=criterion,
                                                                 rounds=rounds)


def leaderboard_is_current(*, tournament, criterion="overall", rounds=DEFAULT_ROUNDS):
    stored = latest_stored(tournament=tournament, criterion=criterion, rounds=rounds)
    return _is_current(stored, tournament=tournament, criterion=criterion, rounds=rounds)


def leaderboard_state(*, tournament, criterion="overall", rounds=DEFAULT_ROUNDS):
    """The board's last stored result and whether it is current; when it is not, its job is queued
    (a second copy of a job in hand costs a message), so a page never waits for a computation."""
    stored = latest_stored(tournament=tournament, criterion=criterion, rounds=rounds)
    current = _is_current(stored, tournament=tournament, criterion=criterion, rounds=rounds)
    if not current:
        enqueue(JOB, tournament.pk, criterion, rounds)
    return LeaderboardState(stored=stored, current=current)


def stale_tournaments():
    """(tournament id, since when) of every tournament with battles whose dashboard board is not
    current, for the outbox sweep: a change whose job was lost is still computed."""
    stale = []
    for tournament in Tournament.objects.filter(battles__isnull=False).distinct().order_by("pk"):
        stored = latest_stored(tournament=tournament)
        if not _is_current(stored, tournament=tournament, criterion="overall", rounds=DEFAULT_ROUNDS):
            stale.append((tournament.pk, stored.computed_at if stored else tournament.created_at))
    return stale
