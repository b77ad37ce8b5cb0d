"""Active against uniform battle sampling: human judgements needed to rank 15 models (issues 26, 41).

    .venv/bin/python benchmarks/quality_active.py [--models 15] [--spread 150] [--round 15] \
        [--seeds 26 ... 245] [--streams 1] [--target 0.9] [--most 4000] [--again]

Models with known true strengths (Elo points drawn from a normal of sd --spread around 1000,
seeded) are judged in rounds of --round judgements, each drawn from Bradley-Terry with the true
strengths (no database: the frames the scoring functions take). Uniform draws every round's
pairs uniformly; active makes the first round balanced and draws the next by the rule the
tournaments use (annotation/scoring/active.py: p(1 - p) * Var(r_a - r_b) from the project's
Bradley-Terry with its prior and bootstrap). After each round the Bradley-Terry ratings are
ranked against the truth; a run needs the judgements made when Spearman first reaches --target.

The comparison is paired: both samplers rank the same truth and see the same coins, the k-th
judgement of a pair coming out the same way whoever asks for it (common random numbers), so a
seed's difference is the samplers' and not the luck of their judgements. --streams N repeats
each seed with N such outcome streams and compares the mean of each sampler's runs. --again adds
two yardsticks: uniform once more with its own draws of pairs (how often a sampler "loses" to
one just like it: the measurement's own noise), and an oracle that knows the true order and
judges only pairs at most two places apart in it (the closest, most even pairs). It prints each
seed's judgements, the medians, the share saved and the share of seeds on which active needed
more than uniform. Rules were tried on seeds 1000-1039; the figures in benchmarks/README.md are on
seeds 26-245.
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

SAMPLERS = ("uniform", "active", "again", "oracle")


def next_pairs(sampler, *, strengths, pairs, battles, round_size, rng):
    models = list(strengths)
    if sampler in ("uniform", "again"):
        return [pairs[i] for i in rng.integers(len(pairs), size=round_size)]
    if sampler == "oracle":
        rank = {m: r for r, m in enumerate(sorted(models, key=strengths.get))}
        near = [(a, b) for a, b in pairs if abs(rank[a] - rank[b]) <= 2]
        return [near[i] for i in rng.integers(len(near), size=round_size)]
    if sampler == "active" and not len(battles):
        return balanced_pairs(dict.fromkeys(pairs, round_size), round_size, rng)
    return draw_pairs(pair_weights(battles, models, seed=len(battles)), round_size, rng)


def judgements_needed(sampler, strengths, *, coins, rng, round_size, target, most):
    """Judgements made when Spearman first reaches `target`; `coins[pair index, k]` decides the
    k-th judgement of a pair for every sampler alike. None when `most` were not enough."""
    models = list(strengths)
    pairs = list(itertools.combinations(models, 2))
    index = {pair: i for i, pair in enumerate(pairs)}
    truth = [strengths[m] for m in models]
    asked = np.zeros(len(pairs), dtype=int)
    rows = []
    while len(rows) < most:
        battles = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])
        for a, b in next_pairs(sampler, strengths=strengths, pairs=pairs, battles=battles,
                               round_size=round_size, rng=rng):
            i = index[(a, b)]
            p_a = 1.0 / (1.0 + BASE ** ((strengths[b] - strengths[a]) / SCALE))
            rows.append((a, b, "model_a" if coins[i, asked[i]] < p_a else "model_b"))
            asked[i] += 1
        ratings = bradley_terry(pd.DataFrame(rows, columns=["model_a", "model_b", "winner"]))
        if spearmanr([ratings.get(m, INITIAL_RATING) for m in models], truth).statistic >= target:
            return len(rows)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=15)
    parser.add_argument("--spread", type=float, default=150.0)
    parser.add_argument("--round", type=int, default=15)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(26, 246)))
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--most", type=int, default=4000)
    parser.add_argument("--again", action="store_true")
    args = parser.parse_args()
    samplers = SAMPLERS if args.again else SAMPLERS[:2]
    found = {name: [] for name in samplers}
    print(f"{args.models} models, true strengths sd {args.spread:g} Elo points, rounds of {args.round} "
          f"judgements, Spearman >= {args.target}, {args.streams} outcome stream(s) a seed")
    print(f"{'seed':>6}" + "".join(f" {name:>9}" for name in samplers) + f" {'active-uniform':>15}")
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        strengths = {f"model-{i:02d}": INITIAL_RATING + args.spread * z
                     for i, z in enumerate(rng.normal(size=args.models))}
        n_pairs = args.models * (args.models - 1) // 2
        runs = {name: [] for name in samplers}
        for stream in range(args.streams):
            coins = np.random.default_rng([seed, stream]).random((n_pairs, args.most))
            for k, name in enumerate(samplers):
                n = judgements_needed(name, strengths, coins=coins, rng=np.random.default_rng([seed, stream, k]),
                                      round_size=args.round, target=args.target, most=args.most)
                runs[name].append(float("inf") if n is None else n)
        means = {name: statistics.fmean(values) for name, values in runs.items()}
        for name, value in means.items():
            found[name].append(value)
        print(f"{seed:>6}" + "".join(f" {means[name]:>9g}" for name in samplers)
              + f" {means['active'] - means['uniform']:>+15g}", flush=True)
    medians = {name: statistics.median(values) for name, values in found.items()}
    print(f"{'median':>6}" + "".join(f" {medians[name]:>9g}" for name in samplers))
    worse = sum(a > u for a, u in zip(found["active"], found["uniform"], strict=True))
    better = sum(a < u for a, u in zip(found["active"], found["uniform"], strict=True))
    print(f"active needs {100 * (1 - medians['active'] / medians['uniform']):.0f}% fewer judgements than uniform "
          f"at the median (goal: at least 25%)")
    print(f"active needed more than uniform on {worse} of {len(args.seeds)} seeds "
          f"({100 * worse / len(args.seeds):.0f}%; goal: at most 10%), fewer on {better}")
    for name in samplers[1:]:
        ratio = np.log(np.array(found[name]) / np.array(found["uniform"]))
        q1, q2, q3 = np.exp(np.quantile(ratio, [0.25, 0.5, 0.75]))
        print(f"per seed, {name} / uniform: quartiles {q1:.2f} {q2:.2f} {q3:.2f}, "
              f"sd of the log ratio {ratio.std(ddof=1):.2f}")
    if args.again:
        for name in samplers[2:]:
            print(f"{name} needs {100 * (1 - medians[name] / medians['uniform']):.0f}% fewer than uniform, needed "
                  f"more on {sum(o > u for o, u in zip(found[name], found['uniform'], strict=True))} seeds")


if __name__ == "__main__":
    main()
