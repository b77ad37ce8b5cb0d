"""A web worker starts without the scientific stack: it loads when a request needs it (a
leaderboard, a plot, a snapshot), so the workers that serve annotators stay small."""

import os
import subprocess
import sys

import pytest

from tests.export_fixtures import judged_tournament_with_criteria_fixture  # noqa: F401
from tests.paths import PROJECT

pytestmark = pytest.mark.integration

ROOT = PROJECT
SCIENTIFIC_STACK = ("numpy", "pandas", "scipy", "sklearn", "numba", "matplotlib",
                    "pyarrow", "datasets", "crowdkit", "krippendorff")

# What gunicorn's worker does before its first request: the WSGI application, then every URL
# pattern (which imports every view) and the admin registrations.
_START_A_WEB_WORKER = """
import json, sys
from crowdbench.wsgi import application
from django.urls import get_resolver
get_resolver().url_patterns
from django.contrib import admin
admin.site.get_urls()
print(json.dumps(sorted(name for name in {stack!r} if name in sys.modules)))
"""


def _loaded_after(code):
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "crowdbench.settings",
                   "PYTHONPATH": str(ROOT)}
    finished = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment,
                              capture_output=True, text=True, timeout=120, check=True)
    return finished.stdout.strip().splitlines()[-1]


def test_a_web_worker_starts_without_the_scientific_stack():
    assert _loaded_after(_START_A_WEB_WORKER.format(stack=SCIENTIFIC_STACK)) == "[]"


def test_the_leaderboard_still_loads_it_when_asked():
    code = _START_A_WEB_WORKER.format(stack=SCIENTIFIC_STACK).replace(
        "print(", "import annotation.scoring.leaderboard, annotation.scoring.plots\nprint(")
    loaded = _loaded_after(code)
    assert '"pandas"' in loaded and '"matplotlib"' in loaded


_READ_A_STORED_LEADERBOARD = """
import json, sys, types
from crowdbench.wsgi import application
from annotation.scoring import stored_figures
from annotation.scoring.leaderboard_display import TournamentLeaderboard
stored = types.SimpleNamespace(**json.load(open(sys.argv[1])))
result = TournamentLeaderboard.from_stored(stored)
shown = [result.agreement_rows, result.crowd_alpha_text, result.judge_report_table, result.rubric_vs_crowd_rows,
         stored_figures.names(result)]
for board in result.boards:
    shown += [board.display_rows, board.few_matches, board.per_battle, board.rubric_rows,
              board.rubric_correlation_text]
assert all(part is not None for part in shown) and result.boards and result.boards[0].display_rows
print(json.dumps(sorted(name for name in {stack!r} if name in sys.modules)))
"""


@pytest.mark.django_db
def test_a_page_showing_a_stored_leaderboard_loads_none_of_it(judged_tournament_with_criteria, tmp_path):
    """The job computes and draws; the page reads what it stored: a web worker that served a
    leaderboard grew from about 130 MB to about 380 MB while the page built pandas frames."""
    import json

    from annotation.scoring.freshness import refresh_leaderboard

    tournament, _ = judged_tournament_with_criteria
    stored = refresh_leaderboard(tournament=tournament, rounds=20)
    saved = tmp_path / "stored.json"
    saved.write_text(json.dumps({
        "data_key": stored.data_key, "criterion": stored.criterion, "rounds": stored.rounds,
        "computed_at": stored.computed_at.isoformat(), "seconds": stored.seconds,
        "judgements": stored.judgements, "result": stored.result}))
    code = _READ_A_STORED_LEADERBOARD.format(stack=SCIENTIFIC_STACK)
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "crowdbench.settings", "PYTHONPATH": str(ROOT)}
    finished = subprocess.run([sys.executable, "-c", code, str(saved)], cwd=ROOT, env=environment,
                              capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert finished.stdout.strip().splitlines()[-1] == "[]"
