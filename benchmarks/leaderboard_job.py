"""How long the leaderboard's background job takes on one big tournament, and what a page pays.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/leaderboard_job.py \
        [--judgements 1000000]

It creates (drops first) the database `crowdbench_bench_leaderboard` and fills it, through the models
(bulk inserts, as benchmarks/scale.py does), with one tournament of 15 models: `--judgements` human
judgements (default 1,000,000), four per battle on ten random pairs of models per question (so
25,000 questions at the default), each with its work unit and assignment, and one finished judge
run with both orderings of every battle (half as many judge judgements again). Then it times:
the fingerprint a page reads to know whether its stored result is current, the job computing the
result (loading the battles, then the bootstraps, agreement and rubric tables), the job again
with nothing changed (the fingerprint only), and the dashboard page rendering the stored result.
"""

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.support import analyse_as_autovacuum_would, fresh_database, set_up_django  # noqa: E402

DATABASE_NAME = "crowdbench_bench_leaderboard"
MODELS, PAIRS_PER_QUESTION, JUDGEMENTS_PER_BATTLE = 15, 10, 4


def timed(what, action):
    started = time.perf_counter()
    result = action()
    print(f"  {what}: {time.perf_counter() - started:.2f} s", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judgements", type=int, default=1_000_000, help="human judgements (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--server", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
                        help="a PostgreSQL URL; only its server is used")
    args = parser.parse_args()
    per_question = PAIRS_PER_QUESTION * JUDGEMENTS_PER_BATTLE
    if args.judgements < per_question:
        parser.error(f"--judgements is at least {per_question} (one question)")
    set_up_django(fresh_database(args.server, DATABASE_NAME))

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from annotation.models import HumanJudgement, JudgeJudgement, LeaderboardResult
    from annotation.scoring import freshness, leaderboard
    from tests.scoring_factories import random_tournament

    print(f"seeding {args.judgements:,} human judgements on {args.judgements // per_question:,} questions", flush=True)
    tournament = timed("seeding", lambda: random_tournament(
        name="Leaderboard benchmark", rng=random.Random(args.seed), models=MODELS,
        questions=args.judgements // per_question, pairs_per_question=PAIRS_PER_QUESTION,
        judgements_per_battle=JUDGEMENTS_PER_BATTLE, judge_runs=1))
    timed("ANALYZE", analyse_as_autovacuum_would)
    humans, judges = HumanJudgement.objects.count(), JudgeJudgement.objects.count()
    print(f"rows: {humans:,} human and {judges:,} judge judgements", flush=True)

    timed("fingerprint (what a page reads to know whether its result is current)",
          lambda: freshness.fingerprint(tournament=tournament))
    timed("loading the battles of every evaluator", lambda: leaderboard.evaluators(tournament=tournament))
    job = time.perf_counter()
    stored = timed("the job (tasks.refresh_leaderboard: load and compute)",
                   lambda: freshness.refresh_leaderboard(tournament=tournament))
    job = time.perf_counter() - job
    print(f"  of which the computation (bootstraps, agreement, tables): {stored.seconds:.2f} s", flush=True)
    timed("the job again, nothing changed (the fingerprint only)",
          lambda: freshness.refresh_leaderboard(tournament=tournament))

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    user = get_user_model().objects.create_superuser("benchmark", password="benchmark")
    client = Client()
    client.force_login(user)
    url = reverse("dashboard:leaderboard", args=[tournament.pk])
    client.get(url)  # the first request imports pandas and the templates
    page = timed("the dashboard page from the stored result", lambda: client.get(url))
    assert page.status_code == 200 and 'data-status="current"' in page.content.decode()
    assert LeaderboardResult.objects.count() == 1
    print(f"the leaderboard job at {humans + judges:,} judgements ({humans:,} human, {judges:,} judge): "
          f"{job:.1f} s on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
