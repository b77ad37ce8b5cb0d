"""Online Elo over battles as FastChat computes it, and its bootstrap (Bradley-Terry is in
bradley_terry.py, win-rates and the leaderboard's table in tables.py).

Every function takes a pandas DataFrame with one row per battle and the columns ``model_a``,
``model_b`` and ``winner`` (``"model_a"``, ``"model_b"`` or ``"tie"``), in the order the battles
were played; some use the optional ``instruction_category`` and ``is_multi_image`` columns. Nothing
here touches the database, so the leaderboard page, the exports and the benchmark share one
implementation.

VisIT-Bench (§4.2, Appendix E) computes Elo with FastChat's ``elo_analysis.py``: online updates in
battle order, K=4, scale 400, base 10, initial rating 1000, a tie counting half a win for each side,
and a bootstrap over battles for the interval. ``online_elo`` and ``bootstrap_elo`` follow those
semantics exactly; the bootstrap runs as a compiled loop over integer-coded battles, parallel over
rounds, instead of FastChat's Python loop.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit, prange

from annotation.scoring import INITIAL_RATING  # noqa: F401 - read as ratings.INITIAL_RATING too

# FastChat also accepts Chatbot Arena's "tie (bothbad)"; accepting it keeps Arena exports usable.
WINNER_SCORES = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5, "tie (bothbad)": 0.5}

K_FACTOR = 4.0
SCALE = 400.0
BASE = 10.0


@dataclass(frozen=True)
class EncodedBattles:
    """Battles as integer model codes and model_a's score (1 win, 0.5 tie, 0 loss)."""

    model_a: np.ndarray
    model_b: np.ndarray
    score_a: np.ndarray
    models: list[str]

    def __len__(self) -> int:
        return len(self.score_a)


def encode_battles(battles: pd.DataFrame) -> EncodedBattles:
    """Integer-code the models in order of first appearance (model_a column first, as FastChat)."""
    missing = {"model_a", "model_b", "winner"} - set(battles.columns)
    if missing:
        raise ValueError(f"battles lack the column(s) {sorted(missing)}")
    n = len(battles)
    codes, models = pd.factorize(pd.concat([battles["model_a"], battles["model_b"]]))
    score_a = battles["winner"].map(WINNER_SCORES).to_numpy(dtype=np.float64)
    if np.isnan(score_a).any():
        unknown = sorted(set(battles["winner"]) - set(WINNER_SCORES), key=str)
        raise ValueError(f"unknown winner value(s) {unknown}; expected one of {list(WINNER_SCORES)}")
    code_a = np.ascontiguousarray(codes[:n], dtype=np.int64)
    code_b = np.ascontiguousarray(codes[n:], dtype=np.int64)
    if (code_a == code_b).any():
        raise ValueError("a battle needs two different models")
    return EncodedBattles(code_a, code_b, score_a, [str(m) for m in models])


# --- Online Elo -------------------------------------------------------------------------------


# The expected score 1 / (1 + base ** ((rb - ra) / scale)) is computed as 1 / (1 + exp(gap)) with
# gap = alpha * (rb - ra), alpha = ln(base) / scale. libm's exp is a call that no loop can
# vectorise, and it was most of the bootstrap's time, so exp is computed here: round gap / ln 2 to
# an integer k, take r = gap - k ln 2 (|r| <= ln 2 / 2; ln 2 in two parts so that r loses nothing),
# exp(r) - 1 by its Taylor series to r**13 (truncation under 1e-17), and 2**k from k's bits. It
# differs from glibc's exp by at most 1 ulp (10,000,000 draws over [-12, 12]: 12% differ by
# 1 ulp), so ratings still agree with FastChat's to about 1e-11. It has no branch, so a loop of it
# compiles to SIMD; beyond |gap| of 700 (2**k would leave the double range) libm's exp is used.
_FAST_EXP_LIMIT = 700.0
_LOG2E = 1.4426950408889634
# fdlibm's split of ln 2: the high part has 32 significant bits, so k * _LN2_HI is exact for the
# |k| < 1011 that occur here, and so is gap minus it
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_ROUNDING_SHIFT = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer in the low bits
_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(14))  # _TAYLOR[n] is r**n's coefficient


@njit(cache=True, inline="always", error_model="numpy")
def _fast_exp(gap):
    shifted = gap * _LOG2E + _ROUNDING_SHIFT
    k = shifted - _ROUNDING_SHIFT
    r = (gap - k * _LN2_HI) - k * _LN2_LO
    r2 = r * r
    r4 = r2 * r2
    # Estrin's scheme: shorter dependency chains than Horner's for the same operations
    low = (_TAYLOR[1] + r * _TAYLOR[2]) + r2 * (_TAYLOR[3] + r * _TAYLOR[4])
    middle = (_TAYLOR[5] + r * _TAYLOR[6]) + r2 * (_TAYLOR[7] + r * _TAYLOR[8])
    high = (_TAYLOR[9] + r * _TAYLOR[10]) + r2 * (_TAYLOR[11] + r * _TAYLOR[12]) + r4 * _TAYLOR[13]
    exp_r_minus_1 = r * (low + r4 * (middle + r4 * high))
    # The low bits of shifted hold k; adding the exponent bias and shifting them into the exponent
    # field keeps only k + 1023, which is 2**k as a double for |gap| < _FAST_EXP_LIMIT.
    k_bits = np.float64(shifted).view(np.uint64)
    two_to_k = np.uint64((k_bits + np.uint64(1023)) << np.uint64(52)).view(np.float64)
    return two_to_k + two_to_k * exp_r_minus_1


@njit(cache=True, inline="always", error_model="numpy")
def _fast_expected_score(gap):
    """Valid only for |gap| < _FAST_EXP_LIMIT; branch-free so that loops of it vectorise."""
    return 1.0 / (1.0 + _fast_exp(gap))


@njit(cache=True, inline="always", error_model="numpy")
def _expected_score(gap, fast_expected):
    """Model a's expected score, given the fast one computed ahead (perhaps as SIMD)."""
    if abs(gap) < _FAST_EXP_LIMIT:
        return fast_expected
    return 1.0 / (1.0 + math.exp(gap))


@njit(cache=True, inline="always", error_model="numpy")
def _play(ratings, a, b, score_a, k, expected_a):
    update = k * (score_a - expected_a)
    ratings[a] += update
    ratings[b] -= update


@njit(cache=True, error_model="numpy")
def _online_elo_kernel(model_a, model_b, score_a, n_models, k, alpha, initial):
    ratings = np.full(n_models, initial)
    for i in range(score_a.shape[0]):
        a = model_a[i]
        b = model_b[i]
        gap = alpha * (ratings[b] - ratings[a])
        # the same expected score as the bootstrap's, so that a round of it played on these
        # battles in this order gives these ratings to the last bit
        _play(ratings, a, b, score_a[i], k, _expected_score(gap, _fast_expected_score(gap)))
    return ratings


def _alpha(scale: float, base: float) -> float:
    return math.log(base) / scale


def online_elo(
    battles: pd.DataFrame,
    *,
    k: float = K_FACTOR,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL_RATING,
) -> pd.Series:
    """FastChat's online Elo: one pass over the battles in the order given, highest rating first."""
    enc = encode_battles(battles)
    ratings = _online_elo_kernel(
        enc.model_a, enc.model_b, enc.score_a, len(enc.models), k, _alpha(scale, base), initial
    )
    return rating_series(ratings, enc.models, "elo")


def rating_series(ratings: np.ndarray, models: list[str], name: str) -> pd.Series:
    series = pd.Series(ratings, index=pd.Index(models, name="model"), name=name)
    return series.sort_values(ascending=False)


# --- Bootstrap resampling ---------------------------------------------------------------------
#
# Each round draws len(battles) battles uniformly with replacement and plays them in the order
# drawn: FastChat's scheme (``battles.sample(frac=1.0, replace=True)`` in the paper-era code, a
# column of ``randint(0, n, size=(n, rounds))`` today). The draws come from a splitmix64 stream
# per round, keyed by (seed, round), so a round's battles are the same whichever thread plays it
# and however many threads there are; numba's own np.random keeps one unseedable state per thread.

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO32 = np.uint64(1 << 32)


@njit(cache=True, inline="always")
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def _round_state(seed, round_index):
    return _mix64(_mix64(np.uint64(seed)) ^ (np.uint64(round_index + 1) * _GOLDEN))


@njit(cache=True, inline="always")
def _draw(state, n):
    """Next uniform integer in [0, n) and the new state (Lemire's unbiased multiply-shift)."""
    bound = np.uint64(n)
    state = state + _GOLDEN
    product = (_mix64(state) >> np.uint64(32)) * bound
    low = product & _LOW32
    if low < bound:
        threshold = (_TWO32 - bound) % bound
        while low < threshold:
            state = state + _GOLDEN
            product = (_mix64(state) >> np.uint64(32)) * bound
            low = product & _LOW32
    return state, np.int64(product >> np.uint64(32))


@njit(cache=True, parallel=True)
def _bootstrap_indices_kernel(n, rounds, seed):
    out = np.empty((n, rounds), dtype=np.int64)
    for r in prange(rounds):
        state = _round_state(seed, r)
        for j in range(n):
            state, idx = _draw(state, n)
            out[j, r] = idx
    return out


# Each thread plays _LANES rounds side by side, in two passes over every _BATCH battles: first it
# draws each lane's battles and looks them up, an independent load per draw that the CPU can
# overlap with the next ones, then it plays them, where each lane's expected score depends on its
# last update. In the second pass the expected scores of all lanes are computed in one loop that
# compiles to SIMD. Each battle is packed into one int64 (model_a, model_b, score). A leaderboard
# has few distinct packed battles (15 models: at most 630), so a drawn battle is read as a 2-byte
# index into that small table: a million battles are then a 2 MB array, where the packed int64s
# were 8 MB read at random.
_LANES = 16
_BATCH = 256
_CODE_BITS = 28
_CODE_MASK = (1 << _CODE_BITS) - 1


def _pack(enc: EncodedBattles) -> tuple[np.ndarray, np.ndarray]:
    """(distinct packed battles, each battle's index into them, as small an integer as fits)."""
    if len(enc.models) > _CODE_MASK:
        raise ValueError("too many models for the packed battle encoding")
    half_points = np.rint(enc.score_a * 2.0).astype(np.int64)
    packed = enc.model_a | (enc.model_b << _CODE_BITS) | (half_points << (2 * _CODE_BITS))
    table, which = np.unique(packed, return_inverse=True)
    index_type = np.uint16 if len(table) <= np.iinfo(np.uint16).max else np.uint32
    return table, which.astype(index_type)


@njit(cache=True, inline="always")
def _unpack(code):
    """(model_a, model_b, model_a's score) of a packed battle."""
    return code & _CODE_MASK, (code >> _CODE_BITS) & _CODE_MASK, 0.5 * (code >> (2 * _CODE_BITS))


@njit(cache=True, parallel=True, error_model="numpy")
def _bootstrap_elo_kernel(table, which, n_models, rounds, seed, k, alpha, initial):
    n = which.shape[0]
    out = np.empty((rounds, n_models))
    n_blocks = (rounds + _LANES - 1) // _LANES
    for block in prange(n_blocks):
        first = block * _LANES
        lanes = min(_LANES, rounds - first)
        ratings = np.full((lanes, n_models), initial)
        states = np.empty(lanes, dtype=np.uint64)
        for lane in range(lanes):
            states[lane] = _round_state(seed, first + lane)
        drawn = np.empty((_BATCH, lanes), dtype=np.int64)
        gaps = np.empty(lanes)
        fast_expected = np.empty(lanes)
        for start in range(0, n, _BATCH):
            steps = min(_BATCH, n - start)
            for lane in range(lanes):
                state = states[lane]
                for step in range(steps):
                    state, i = _draw(state, n)
                    drawn[step, lane] = table[which[i]]
                states[lane] = state
            for step in range(steps):
                for lane in range(lanes):
                    a, b, _ = _unpack(drawn[step, lane])
                    gaps[lane] = alpha * (ratings[lane, b] - ratings[lane, a])
                for lane in range(lanes):
                    fast_expected[lane] = _fast_expected_score(gaps[lane])
                for lane in range(lanes):
                    a, b, score_a = _unpack(drawn[step, lane])
                    _play(ratings[lane], a, b, score_a, k, _expected_score(gaps[lane], fast_expected[lane]))
        for lane in range(lanes):
            out[first + lane, :] = ratings[lane]
    return out


# numba's default "workqueue" threading layer aborts the process when two threads launch parallel
# kernels at once, which a threaded server (runserver, gthread workers) would do on two
# simultaneous leaderboard requests; the kernels run one at a time per process instead.
_PARALLEL_LOCK = threading.Lock()


def _check_seed(seed: int) -> int:
    if not 0 <= seed < 2**63:
        raise ValueError("seed must be a non-negative 63-bit integer")
    return int(seed)


def bootstrap_indices(n: int, rounds: int, *, seed: int = 0) -> np.ndarray:
    """The battle indices ``bootstrap_elo`` plays, shape (n, rounds) as in FastChat: column r is
    round r's battles in playing order. For checking other implementations on the same draws."""
    if not 0 < n < 2**32:
        raise ValueError("n must be between 1 and 2**32 - 1")
    with _PARALLEL_LOCK:
        return _bootstrap_indices_kernel(n, rounds, _check_seed(seed))


def bootstrap_elo_samples(
    battles: pd.DataFrame,
    *,
    rounds: int = 1000,
    seed: int = 0,
    k: float = K_FACTOR,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL_RATING,
) -> pd.DataFrame:
    """Online Elo on each bootstrap round: one row per round, one column per model."""
    enc = encode_battles(battles)
    if not 0 < len(enc) < 2**32:
        raise ValueError("the bootstrap needs between 1 and 2**32 - 1 battles")
    table, which = _pack(enc)
    seed = _check_seed(seed)
    with _PARALLEL_LOCK:
        samples = _bootstrap_elo_kernel(table, which, len(enc.models), int(rounds), seed, k,
                                        _alpha(scale, base), initial)
    return pd.DataFrame(samples, columns=pd.Index(enc.models, name="model"))


def summarise_samples(samples: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """Median and central percentile interval per model (FastChat reports the bootstrap median
    as the rating and the 2.5/97.5 percentiles as its interval), highest rating first."""
    tail = (1.0 - level) / 2.0
    table = pd.DataFrame(
        {
            "model": samples.columns.astype(str),
            "rating": samples.median().to_numpy(),
            "lower": samples.quantile(tail).to_numpy(),
            "upper": samples.quantile(1.0 - tail).to_numpy(),
        }
    )
    return table.sort_values("rating", ascending=False, ignore_index=True)


def bootstrap_elo(
    battles: pd.DataFrame,
    *,
    rounds: int = 1000,
    seed: int = 0,
    k: float = K_FACTOR,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL_RATING,
    level: float = 0.95,
) -> pd.DataFrame:
    """Bootstrapped online Elo: columns model, rating (median), lower, upper."""
    samples = bootstrap_elo_samples(battles, rounds=rounds, seed=seed, k=k, scale=scale, base=base, initial=initial)
    return summarise_samples(samples, level=level)
