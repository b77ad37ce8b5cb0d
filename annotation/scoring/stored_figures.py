"""A stored leaderboard's figures, drawn once per result and kept as PNG files beside it.

The leaderboard job draws every figure of a result it stores (tasks/scoring.py), so a page's
figures are files read from the "figures" storage: a web worker never loads matplotlib to serve
them, and a figure costs a read, not 0.25 to 1 s of drawing. A figure is named by its result's
data key, so it never changes; a result stored by the command or a snapshot, or before figures were
kept, has its figure drawn and kept by the first request that asks for it. The figures of a result
go when the result does (freshness.py).
"""

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage, storages

JUDGE_REPORT_LENGTH = "judge-report-length"


class NoFigure(Exception):
    """The result has nothing to draw under that name; the message says why."""


def _storage():
    return storages["figures"] if "figures" in settings.STORAGES else default_storage


def _folder(stored):
    return f"leaderboards/{stored.tournament_id}/{stored.data_key}"


def _shown(stored):
    # Read here, not on import: pandas and SciPy load only where a figure is drawn.
    from annotation.scoring.leaderboard_display import TournamentLeaderboard

    return TournamentLeaderboard.from_stored(stored)


def _elo(result, key):
    from annotation.scoring import plots

    board = result.board(key)
    if board is None:
        raise NoFigure("No such evaluator in this tournament.")
    if not board.rows:
        raise NoFigure("No battles judged yet.")
    table = board.rated_table
    if "split" in table.columns:
        # The figure shows the all-images ratings; the table beside it has each split.
        table = table[table["split"] == table["split"].iloc[0]]
    return plots.elo_interval_plot(table, title=f"{board.title}: Elo and Bradley-Terry, 95% interval")


def _categories(result, key):
    from annotation.scoring import plots

    board = result.board(key)
    if board is None:
        raise NoFigure("No such evaluator in this tournament.")
    if not board.rows:
        raise NoFigure("No battles judged yet.")
    if board.category_table.empty:
        raise NoFigure("No battle against the reference yet.")
    return plots.category_heatmap(board.category_table, title=f"{board.title}: win-rate vs. reference")


def _agreement(result, key):
    from annotation.scoring import plots

    found = result.agreement(key)
    if found is None:
        raise NoFigure("This judge shares no battles with the crowd yet.")
    return plots.agreement_bars(result.majority_table(key),
                                title=f"{found['judge']}: agreement with the crowd majority")


def _judge_report_length(result, tournament):
    from annotation.scoring import plots

    return plots.length_bias_plot(result.judge_report, title=f"{tournament.name}: win rate of the longer answer")


def _draw(stored, result, name):
    kind, _, key = name.partition("-")
    if name == JUDGE_REPORT_LENGTH:
        return _judge_report_length(result, stored.tournament)
    drawing = {"elo": _elo, "categories": _categories, "agreement": _agreement}.get(kind)
    if drawing is None or not key:
        raise NoFigure("No such figure.")
    return drawing(result, key)


def names(result):
    """Every figure a result has something to draw in, as the leaderboard page shows them."""
    found = [JUDGE_REPORT_LENGTH]
    for board in result.boards:
        if board.rows:
            found.append(f"elo-{board.key}")
            if board.categories:
                found.append(f"categories-{board.key}")
    found += [f"agreement-{agreement['key']}" for agreement in result.agreements]
    return found


def figure(stored, name, *, result=None):
    """The PNG of figure `name` of a stored result (a LeaderboardResult): read from its file, or
    drawn and kept when it has none yet. Raises NoFigure when the result has nothing to draw."""
    storage, path = _storage(), f"{_folder(stored)}/{name}.png"
    # Opened straight away, not asked for first: asking is a round trip of its own on S3.
    try:
        with storage.open(path, "rb") as file:
            return file.read()
    except FileNotFoundError:
        pass
    picture = _draw(stored, result or _shown(stored), name)
    if not storage.exists(path):
        storage.save(path, ContentFile(picture))
    return picture


def draw_all(stored):
    """Draw and keep every figure of a stored result that has none yet (the leaderboard job's
    last step); returns how many figures the result has."""
    result = _shown(stored)
    shown = names(result)
    for name in shown:
        figure(stored, name, result=result)
    return len(shown)


def forget(tournament_id, data_keys):
    """Delete the figures of the results of a tournament with these data keys (results dropped)."""
    storage = _storage()
    for data_key in data_keys:
        folder = f"leaderboards/{tournament_id}/{data_key}"
        try:
            _, files = storage.listdir(folder)
        except FileNotFoundError:
            continue
        for name in files:
            storage.delete(f"{folder}/{name}")
