"""Time the leaderboard's scoring against FastChat's own code on simulated judge battles.

Run from the project root:  .venv/bin/python benchmarks/ratings.py  [--full] [--rounds R] [--battles N ...]

Needs the ``benchmarks`` extra (``pip install -e '.[benchmarks]'``: fschat 0.2.36, the release
VisIT-Bench cites, with the plotting and time-zone packages its elo_analysis module imports).

Battles among 15 models are drawn from known Bradley-Terry strengths with a fixed seed: 31,735 of
them (the size of the VisIT-Bench leaderboard in Table 4) and, with --full, 1,000,000. For each
size, ours (annotation.scoring) and FastChat's (fastchat.serve.monitor.elo_analysis) are printed
side by side: wall-clock time, peak memory (the most resident memory the call added), and the
largest rating difference on the same battles and the same bootstrap draws:

- online Elo: ``ratings.online_elo`` against FastChat's ``compute_elo``;
- its bootstrap: ``ratings.bootstrap_elo_samples`` against ``get_bootstrap_result(battles,
  compute_elo, rounds)``;
- Bradley-Terry: ``bradley_terry.bradley_terry`` against ``compute_elo_mle_with_tie`` (0.2.36's
  name for what later FastChat calls ``compute_mle_elo``);
- its bootstrap: ``bradley_terry.bootstrap_bradley_terry_samples`` against ``get_bootstrap_result(
  battles, compute_elo_mle_with_tie, rounds)``.

The same draws: FastChat resamples with ``battles.sample(frac=1.0, replace=True)`` from numpy's
global random state, which is seeded here, so its draws are drawn again the same way and our
single-fit functions are run on each of them. (Our bootstraps draw their own rounds, faster: their
timings are of the bootstraps as the leaderboard runs them.)

FastChat 0.2.36 fits Bradley-Terry with scikit-learn's LogisticRegression at its defaults: an L2
penalty of C=1 on every battle counted twice, which is a Gaussian prior with a standard deviation
of sqrt(2) * 400 Elo points. Ours states its prior (BT_PRIOR_SD, 400 points), so it is compared
with the prior FastChat's fit has; how far our leaderboard's own prior moves the ratings is
printed too.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# FastChat's bootstrap draws a tqdm progress bar; tqdm reads this when it is first imported.
os.environ.setdefault("TQDM_DISABLE", "1")

from annotation.scoring import BT_PRIOR_SD, bradley_terry, ratings  # noqa: E402

N_MODELS = 15
SMALL = 31_735
LARGE = 1_000_000
FULL_ROUNDS = 1_000
QUICK_ROUNDS = 50
TIE_RATE = 0.1
# scikit-learn's C=1 on each battle counted twice: a prior of variance 2 in natural units.
FASTCHAT_PRIOR_SD = math.sqrt(2.0) * ratings.SCALE


def simulate_battles(n: int, *, seed: int) -> pd.DataFrame:
    """Uniformly drawn pairs, a Bradley-Terry winner on the Elo scale, 10% ties (the judge's
    undecided verdicts)."""
    rng = np.random.default_rng(seed)
    names = np.array([f"model-{i:02d}" for i in range(N_MODELS)])
    elo = np.sort(rng.normal(1000.0, 120.0, N_MODELS))[::-1]
    a = rng.integers(0, N_MODELS, n)
    b = (a + rng.integers(1, N_MODELS, n)) % N_MODELS
    p_a = 1.0 / (1.0 + 10.0 ** ((elo[b] - elo[a]) / 400.0))
    winner = np.where(rng.random(n) < p_a, "model_a", "model_b")
    winner = np.where(rng.random(n) < TIE_RATE, "tie", winner)
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


def load_fastchat():
    """fastchat.serve.monitor.elo_analysis as fschat ships it, and the installed version.

    ``fastchat/model/__init__.py`` imports the model-serving adapters (torch, transformers), which
    the ``benchmarks`` extra does not install; elo_analysis needs only ``fastchat.model.
    model_registry`` from that package. The package is therefore registered without running its
    ``__init__``, and every module that is imported, elo_analysis included, is fschat's own file.
    """
    try:
        version = importlib.metadata.version("fschat")
    except importlib.metadata.PackageNotFoundError:
        sys.exit("fschat is not installed: pip install -e '.[benchmarks]' (fschat 0.2.36).")
    import fastchat

    if "fastchat.model" not in sys.modules:
        package = types.ModuleType("fastchat.model")
        package.__path__ = [str(Path(fastchat.__file__).parent / "model")]
        sys.modules["fastchat.model"] = package
    # compute_elo_mle_with_tie imports scikit-learn on its first call; imported here, outside the
    # timings, as our numba kernels are compiled or loaded before them.
    import sklearn.linear_model  # noqa: F401
    from fastchat.serve.monitor import elo_analysis

    return elo_analysis, version


class PeakMemory:
    """The most resident memory a block added, read from Linux's high-water mark (VmHWM), which
    writing 5 to /proc/self/clear_refs resets. Counts numpy's and numba's allocations alike."""

    def __enter__(self):
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.start = self._read("VmRSS")
        except OSError:
            self.start = None
        return self

    def __exit__(self, *exc):
        self.added = None if self.start is None else self._read("VmHWM") - self.start

    @staticmethod
    def _read(field):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise OSError(field)


def measure(func, *args, **kwargs):
    """(result, seconds, bytes of peak memory added) of one call."""
    with PeakMemory() as memory:
        start = time.perf_counter()
        result = func(*args, **kwargs)
        seconds = time.perf_counter() - start
    return result, seconds, memory.added


def megabytes(value):
    return "n/a" if value is None else f"{value / 2**20:,.0f} MB"


def fastchat_draws(n, rounds, seed):
    """The battle indices ``get_bootstrap_result`` resamples after ``np.random.seed(seed)``:
    pandas' ``sample(frac=1.0, replace=True)`` draws ``RandomState.choice(n, n)`` from numpy's
    global state, one round after another."""
    state = np.random.RandomState(seed)
    for _ in range(rounds):
        yield state.choice(n, size=n, replace=True)


def largest_difference(ours: pd.Series | pd.DataFrame, theirs: pd.Series | pd.DataFrame) -> float:
    return float(np.abs(ours[theirs.columns if isinstance(theirs, pd.DataFrame) else theirs.index]
                        .to_numpy() - theirs.to_numpy()).max())


class Table:
    def __init__(self):
        self.rows = []

    def add(self, what, battles, rounds, ours, theirs, difference, note=""):
        (_, our_seconds, our_memory), (_, their_seconds, their_memory) = ours, theirs
        row = {
            "what": what, "battles": f"{battles:,}", "rounds": rounds,
            "ours s": f"{our_seconds:.3f}", "FastChat s": f"{their_seconds:.3f}",
            "faster": f"{their_seconds / our_seconds:,.0f}x",
            "ours peak": megabytes(our_memory), "FastChat peak": megabytes(their_memory),
            "max |diff|": f"{difference:.1e}", "note": note,
        }
        self.rows.append(row)
        print("  " + "  ".join(f"{key} {value}" for key, value in row.items() if value != ""), flush=True)

    def print(self):
        print()
        print(pd.DataFrame(self.rows).to_string(index=False))


def compare(table, fastchat, battles, *, rounds, seed=2023):
    n = len(battles)
    print(f"\n{n:,} battles among {N_MODELS} models, {rounds:,} bootstrap rounds", flush=True)

    ours = measure(ratings.online_elo, battles)
    theirs = measure(fastchat.compute_elo, battles)
    table.add("online Elo", n, 1, ours, theirs, largest_difference(ours[0], pd.Series(theirs[0])))

    ours = measure(ratings.bootstrap_elo_samples, battles, rounds=rounds, seed=seed)
    np.random.seed(seed)
    theirs = measure(fastchat.get_bootstrap_result, battles, fastchat.compute_elo, rounds)
    same_draws = pd.DataFrame([ratings.online_elo(battles.iloc[draw])
                               for draw in fastchat_draws(n, rounds, seed)])
    table.add("online Elo bootstrap", n, rounds, ours, theirs, largest_difference(same_draws, theirs[0]),
              "ours: numba, every core; FastChat: one Python loop")

    ours = measure(bradley_terry.bradley_terry, battles, prior_sd=FASTCHAT_PRIOR_SD)
    theirs = measure(fastchat.compute_elo_mle_with_tie, battles)
    own_prior = bradley_terry.bradley_terry(battles)
    table.add("Bradley-Terry", n, 1, ours, theirs, largest_difference(ours[0], theirs[0]),
              f"same prior; our leaderboard's (sd {BT_PRIOR_SD:.0f}) moves it by at most "
              f"{largest_difference(own_prior, ours[0]):.1e}")

    ours = measure(bradley_terry.bootstrap_bradley_terry_samples, battles, rounds=rounds, seed=seed,
                   prior_sd=FASTCHAT_PRIOR_SD)
    np.random.seed(seed)
    theirs = measure(fastchat.get_bootstrap_result, battles, fastchat.compute_elo_mle_with_tie, rounds)
    same_draws = pd.DataFrame([bradley_terry.bradley_terry(battles.iloc[draw], prior_sd=FASTCHAT_PRIOR_SD)
                               for draw in fastchat_draws(n, rounds, seed)])
    table.add("Bradley-Terry bootstrap", n, rounds, ours, theirs, largest_difference(same_draws, theirs[0]),
              "ours: multinomial counts, Newton; FastChat: scikit-learn per round")


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true",
                        help=f"{SMALL:,} and {LARGE:,} battles, {FULL_ROUNDS:,} rounds each (FastChat's "
                             "side takes hours at a million battles)")
    parser.add_argument("--rounds", type=positive,
                        help=f"bootstrap rounds (default {QUICK_ROUNDS}, {FULL_ROUNDS:,} with --full)")
    parser.add_argument("--battles", type=positive, nargs="+",
                        help=f"numbers of battles to compare at (default {SMALL:,}; with --full "
                             f"{SMALL:,} and {LARGE:,})")
    args = parser.parse_args(argv)
    rounds = args.rounds or (FULL_ROUNDS if args.full else QUICK_ROUNDS)
    sizes = args.battles or ([SMALL, LARGE] if args.full else [SMALL])

    fastchat, version = load_fastchat()
    print(f"FastChat: fschat {version}, {fastchat.__file__}")
    warm = simulate_battles(100, seed=1)
    start = time.perf_counter()
    ratings.bootstrap_elo_samples(warm, rounds=8)
    ratings.online_elo(warm)
    print(f"numba warm-up (compile, or load from cache): {time.perf_counter() - start:.2f} s")

    table = Table()
    for n in sizes:
        compare(table, fastchat, simulate_battles(n, seed=2023 if n == SMALL else 2024), rounds=rounds)
    table.print()


if __name__ == "__main__":
    main()
