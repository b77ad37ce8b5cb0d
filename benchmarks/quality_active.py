"""Active against uniform battle sampling: human judgements needed to rank 15 models (issue 26).

    .venv/bin/python benchmarks/quality_active.py [--models 15] [--spread 150] [--round 45] \
        [--seeds 26 ... 45] [--target 0.9] [--most 20000]

Models with known true strengths (Elo points drawn from a normal of sd --spread around 1000,
seeded) are judged in rounds of --round judgements: each judgement of a pair is drawn from
Bradley-Terry with the true strengths (no database: the frames the scoring functions take).
Uniform draws every round's pairs uniformly; active makes the first round balanced (every
model in as many battles as the others) and draws the next by the rule the tournaments use
(annotation/scoring/active.py: p(1 - p) * Var(r_a - r_b) from the project's Bradley-Terry with
its prior and bootstrap). After each round the Bradley-Terry
ratings are ranked against the truth; it prints, per seed and as the median, how many
judgements each needed for Spearman >= --target. The goal: active needs at least 30% fewer.
"""

import argparse
import itertools
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from annotation.scoring.active import balanced_pairs, draw_pairs, pair_weights  # noqa: E402
from annotation.scoring.bradley_terry import bradley_terry  # noqa: E402
from annotation.scoring.ratings import BASE, INITIAL_RATING, SCALE  # noqa: E402


def judgements_needed(strengths, *, active, seed, round_size, target, most):
    models = list(strengths)
    rng = np.random.default_rng(seed)
    uniform = dict.fromkeys(itertools.combinations(models, 2), 1.0)
    rows = []
    while len(rows) < most:
        battles = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])
        if not active:
            pairs = draw_pairs(uniform, round_size, rng)
        elif not rows:
            pairs = balanced_pairs(dict.fromkeys(uniform, round_size), round_size, rng)
        else:
            pairs = draw_pairs(pair_weights(battles, models, seed=len(rows)), round_size, rng)
        for a, b in pairs:
            if rng.random() < 0.5:
                a, b = b, a
            p_a = 1.0 / (1.0 + BASE ** ((strengths[b] - strengths[a]) / SCALE))
            rows.append((a, b, "model_a" if rng.random() < p_a else "model_b"))
        ratings = bradley_terry(pd.DataFrame(rows, columns=["model_a", "model_b", "winner"]))
        fitted = [ratings.get(m, INITIAL_RATING) for m in models]
        if spearmanr(fitted, [strengths[m] for m in models]).statistic >= target:
            return len(rows)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=15)
    parser.add_argument("--spread", type=float, default=150.0)
    parser.add_argument("--round", type=int, default=45)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(26, 46)))
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--most", type=int, default=20000)
    args = parser.parse_args()
    found = {"uniform": [], "active": []}
    print(f"{args.models} models, true strengths sd {args.spread:g} Elo points, rounds of {args.round} "
          f"judgements, Spearman >= {args.target}")
    print(f"{'seed':>6} {'uniform':>9} {'active':>9}")
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        strengths = {f"model-{i:02d}": INITIAL_RATING + args.spread * z
                     for i, z in enumerate(rng.normal(size=args.models))}
        needed = {
            name: judgements_needed(strengths, active=name == "active", seed=seed + 1000,
                                    round_size=args.round, target=args.target, most=args.most)
            for name in found
        }
        for name, n in needed.items():
            found[name].append(n if n is not None else float("inf"))
        print(f"{seed:>6} {needed['uniform'] or '>' + str(args.most):>9} {needed['active'] or '>' + str(args.most):>9}")
    uniform, active = statistics.median(found["uniform"]), statistics.median(found["active"])
    print(f"{'median':>6} {uniform:>9g} {active:>9g}")
    print(f"active needs {100 * (1 - active / uniform):.0f}% fewer judgements than uniform (goal: at least 30%)")


if __name__ == "__main__":
    main()
