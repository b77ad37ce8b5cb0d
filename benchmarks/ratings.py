"""Time the leaderboard's scoring against FastChat's algorithms on simulated judge battles.

Run from the project root:  .venv/bin/python benchmarks/ratings.py  [--quick | --full] [--repeat 3]

Battles among 15 models are drawn from known Bradley-Terry strengths with a fixed seed: 31,735 of
them (the size of the VisIT-Bench leaderboard in Table 4) and 1,000,000. The script times

- annotation.scoring.ratings: online Elo, its 1,000-round bootstrap, the Bradley-Terry fit (with
  its prior, annotation.scoring.BT_PRIOR_SD) and its 1,000-round bootstrap;
- FastChat's current bootstrap algorithm (one Python loop over the battles, each step vectorised
  across rounds with numpy), re-implemented below from its description, on the same resampled
  battles, printing the largest rating difference; the two bootstraps run --repeat times each,
  interleaved, and the speed-up is printed on the medians and on the best runs;
- FastChat 0.2.36's paper-era ``compute_elo`` (the code VisIT-Bench cites), if fschat is
  installed (``pip install -e '.[benchmarks]'``), on a few rounds of the same resampled battles.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from annotation.scoring import bradley_terry, ratings  # noqa: E402

N_MODELS = 15
SMALL = 31_735
LARGE = 1_000_000
ROUNDS = 1_000
TIE_RATE = 0.1


def simulate_battles(n: int, *, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    """Uniformly drawn pairs, a Bradley-Terry winner on the Elo scale, 10% ties (the judge's
    undecided verdicts)."""
    rng = np.random.default_rng(seed)
    strengths = pd.Series(
        np.sort(rng.normal(1000.0, 120.0, N_MODELS))[::-1],
        index=[f"model-{i:02d}" for i in range(N_MODELS)],
    )
    names = strengths.index.to_numpy()
    elo = strengths.to_numpy()
    a = rng.integers(0, N_MODELS, n)
    b = (a + rng.integers(1, N_MODELS, n)) % N_MODELS
    p_a = 1.0 / (1.0 + 10.0 ** ((elo[b] - elo[a]) / 400.0))
    winner = np.where(rng.random(n) < p_a, "model_a", "model_b")
    winner = np.where(rng.random(n) < TIE_RATE, "tie", winner)
    battles = pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})
    return battles, strengths


def fastchat_current_bootstrap(
    battles: pd.DataFrame, sample_indices: np.ndarray, k=4.0, base=10.0, scale=400.0, initial=1000.0
) -> pd.DataFrame:
    """FastChat's present algorithm as we understand it: ratings for all rounds kept in one
    (rounds, models) array, starting at zero; a Python loop over the rows of the (battles,
    rounds) index matrix, each row one battle per round, updated for all rounds at once; the
    initial rating added at the end."""
    enc = ratings.encode_battles(battles)
    rounds = sample_indices.shape[1]
    alpha = math.log(base) / scale
    values = np.zeros((rounds, len(enc.models)))
    every_round = np.arange(rounds)
    for row in sample_indices:
        a = enc.model_a[row]
        b = enc.model_b[row]
        expected_a = expit(alpha * (values[every_round, a] - values[every_round, b]))
        update = k * (enc.score_a[row] - expected_a)
        values[every_round, a] += update
        values[every_round, b] -= update
    return pd.DataFrame(values + initial, columns=enc.models)


def load_paper_era_compute_elo():
    """FastChat 0.2.36's ``compute_elo``, or None and the reason it is unavailable.

    Importing ``fastchat.serve.monitor.elo_analysis`` pulls in fastchat.model (torch,
    transformers), plotly and pytz, none of which ``compute_elo`` uses; when that import fails the
    function is compiled on its own from the installed source file, so the code timed is still
    fschat's own.
    """
    try:
        version = importlib.metadata.version("fschat")
    except importlib.metadata.PackageNotFoundError:
        return None, "fschat is not installed (pip install -e '.[benchmarks]' installs 0.2.36)"
    try:
        from fastchat.serve.monitor.elo_analysis import compute_elo

        return compute_elo, f"fschat {version}, imported"
    except ImportError as error:
        reason = f"{error.name} missing"
    spec = importlib.util.find_spec("fastchat")
    path = Path(spec.origin).parent / "serve" / "monitor" / "elo_analysis.py"
    if not path.exists():
        return None, f"fschat {version} has no {path.name}"
    tree = ast.parse(path.read_text())
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "compute_elo"]
    if not functions:
        return None, f"fschat {version}'s {path.name} has no compute_elo"
    namespace = {"defaultdict": defaultdict}
    exec(compile(ast.Module(body=functions, type_ignores=[]), str(path), "exec"), namespace)
    return namespace["compute_elo"], f"fschat {version}, compute_elo compiled from source ({reason})"


def timed(func, *args, repeat=1, **kwargs):
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        result = func(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return result, best


class Report:
    def __init__(self):
        self.rows = []

    def add(self, what, n, rounds, seconds, note=""):
        self.rows.append(
            {
                "what": what,
                "battles": f"{n:,}",
                "rounds": rounds,
                "seconds": f"{seconds:.3f}",
                "rounds/s": f"{rounds / seconds:,.1f}",
                "battles/s": f"{n * max(rounds, 1) / seconds:,.0f}",
                "note": note,
            }
        )
        print(f"  {what:<44} {n:>9,} battles  {rounds:>5} rounds  {seconds:8.3f} s  {note}")

    def print_table(self):
        print()
        print(pd.DataFrame(self.rows).to_string(index=False))


def max_abs_diff(ours: pd.DataFrame, theirs: pd.DataFrame) -> float:
    return float(np.abs(ours[theirs.columns].to_numpy() - theirs.to_numpy()).max())


def elo_benchmarks(report, battles, *, rounds, reference_rounds, repeat, seed=0):
    n = len(battles)
    _, seconds = timed(ratings.online_elo, battles, repeat=3)
    report.add("online Elo (one pass)", n, 1, seconds)

    indices = ratings.bootstrap_indices(n, reference_rounds, seed=seed)
    ours, theirs = [], []
    for _ in range(repeat):  # interleaved, so both see the same machine
        samples, seconds = timed(ratings.bootstrap_elo_samples, battles, rounds=rounds, seed=seed)
        ours.append(seconds)
        reference, seconds = timed(fastchat_current_bootstrap, battles, indices)
        theirs.append(seconds)
    diff = max_abs_diff(samples.iloc[:reference_rounds], reference)
    report.add("online Elo bootstrap, annotation.scoring.ratings", n, rounds, min(ours),
               f"numba, parallel; median {statistics.median(ours):.3f} s")
    report.add(
        "online Elo bootstrap, FastChat current algorithm",
        n,
        reference_rounds,
        min(theirs),
        f"median {statistics.median(theirs):.3f} s; max |diff| {diff:.1e} on the same draws",
    )

    def speedup(ours_seconds, theirs_seconds):
        return (theirs_seconds / reference_rounds) / (ours_seconds / rounds)

    print(f"    speed-up per round over FastChat's current algorithm ({repeat} repetitions, interleaved): "
          f"{speedup(statistics.median(ours), statistics.median(theirs)):.1f}x on medians, "
          f"{speedup(min(ours), min(theirs)):.1f}x on the best runs; ratings identical on the same draws: "
          f"{'yes' if diff < 1e-6 else 'NO'} (max |diff| {diff:.1e})")
    return samples, indices


def paper_era_benchmark(report, battles, samples, indices, compute_elo, *, rounds):
    n = len(battles)
    worst = 0.0
    start = time.perf_counter()
    for r in range(rounds):
        resampled = battles.iloc[indices[:, r]]
        result = pd.Series(compute_elo(resampled))
        worst = max(worst, float(np.abs(samples.iloc[r][result.index] - result).max()))
    seconds = time.perf_counter() - start
    report.add(
        "online Elo bootstrap, fschat 0.2.36 compute_elo",
        n,
        rounds,
        seconds,
        f"max |diff| {worst:.1e}; 1,000 rounds ~ {seconds / rounds * 1000:,.0f} s",
    )


def bt_benchmarks(report, battles, strengths, *, rounds, seed=0):
    n = len(battles)
    # The simulated ties carry no information about strength, so counting them as half wins
    # shrinks every gap by the tie rate; the order is what the fit should recover.
    bt, seconds = timed(bradley_terry.bradley_terry, battles, repeat=3)
    rho = spearmanr(bt[strengths.index], strengths).statistic
    report.add("Bradley-Terry with prior (Newton, aggregated)", n, 1, seconds, f"rho vs truth {rho:.3f}")
    boot, seconds = timed(bradley_terry.bootstrap_bradley_terry, battles, rounds=rounds, seed=seed)
    boot = boot.set_index("model")
    inside = int(((boot["lower"] <= bt[boot.index]) & (bt[boot.index] <= boot["upper"])).sum())
    report.add(
        "Bradley-Terry bootstrap (multinomial counts)",
        n,
        rounds,
        seconds,
        f"full-data fit inside 95% interval for {inside}/{len(bt)} models",
    )


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 1,000,000-battle FastChat reference")
    parser.add_argument("--full", action="store_true",
                        help="run FastChat's algorithm for all 1,000 rounds on 1,000,000 battles "
                             "(its index matrix takes 8 GB; one to three minutes a repetition)")
    parser.add_argument("--repeat", type=positive, default=3,
                        help="repetitions of each Elo bootstrap, ours and FastChat's interleaved (default 3)")
    args = parser.parse_args(argv)

    small, small_strengths = simulate_battles(SMALL, seed=2023)
    large, large_strengths = simulate_battles(LARGE, seed=2024)

    start = time.perf_counter()
    ratings.bootstrap_elo_samples(small.head(100), rounds=8)
    ratings.online_elo(small.head(100))
    ratings.bootstrap_indices(100, 8)
    print(f"numba warm-up (compile, or load from cache): {time.perf_counter() - start:.2f} s")

    report = Report()
    print(f"\n{SMALL:,} battles among {N_MODELS} models")
    samples, indices = elo_benchmarks(report, small, rounds=ROUNDS, reference_rounds=ROUNDS,
                                      repeat=args.repeat)
    compute_elo, how = load_paper_era_compute_elo()
    if compute_elo is None:
        print(f"  skipping the paper-era FastChat baseline: {how}")
    else:
        print(f"  paper-era baseline: {how}")
        paper_era_benchmark(report, small, samples, indices, compute_elo, rounds=5)
    bt_benchmarks(report, small, small_strengths, rounds=ROUNDS)

    print(f"\n{LARGE:,} battles among {N_MODELS} models")
    if args.quick:
        _, seconds = timed(ratings.bootstrap_elo_samples, large, rounds=ROUNDS)
        report.add("online Elo bootstrap, annotation.scoring.ratings", LARGE, ROUNDS, seconds)
    elif args.full:
        # The same 1,000 rounds on both sides, each round's ratings compared.
        elo_benchmarks(report, large, rounds=ROUNDS, reference_rounds=ROUNDS, repeat=args.repeat)
    else:
        # FastChat's index matrix is battles x rounds (8 GB at 1,000 rounds), so its algorithm
        # runs 10 rounds here. Its Python loop runs once per battle whatever the rounds, so ten
        # rounds cost it nearly as much as a thousand: the per-round speed-up printed is far too
        # high; --full measures the real one.
        elo_benchmarks(report, large, rounds=ROUNDS, reference_rounds=10, repeat=args.repeat)
    bt_benchmarks(report, large, large_strengths, rounds=ROUNDS)

    report.print_table()


if __name__ == "__main__":
    main()
