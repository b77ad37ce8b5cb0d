"""The scoring mathematics of annotation.scoring.ratings: hand-computed cases, reference loops, simulation."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq

from annotation.scoring import BT_PRIOR_SD, bradley_terry, ratings, tables
from annotation.scoring.plots import category_heatmap, elo_interval_plot
from tests.annotation.scoring.simulation import simulated_battles


def frame(rows, **extra):
    battles = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])
    for name, values in extra.items():
        battles[name] = values
    return battles


def reference_online_elo(battles, k=4, scale=400, base=10, initial=1000):
    """The textbook loop, written independently of the module: separate expectations for both
    sides, as in the paper-era FastChat code."""
    rating = {}
    for model_a, model_b, winner in battles[["model_a", "model_b", "winner"]].itertuples(index=False):
        ra = rating.setdefault(model_a, initial)
        rb = rating.setdefault(model_b, initial)
        ea = 1 / (1 + base ** ((rb - ra) / scale))
        eb = 1 / (1 + base ** ((ra - rb) / scale))
        sa = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[winner]
        rating[model_a] = ra + k * (sa - ea)
        rating[model_b] = rb + k * (1 - sa - eb)
    return pd.Series(rating)


# After the first battle A has 1002 and B 998. Meeting again, A expects
# 1 / (1 + 10 ** (-4 / 400)) = 1 / (1 + 0.97723722095581) = 0.50575620841, so a loss costs it
# K * 0.50575620841 = 2.02302483366 points and a tie K * 0.00575620841 = 0.02302483366.
E_AFTER_FIRST = 1.0 / (1.0 + 10.0 ** (-0.01))


def test_first_battle_between_equals_moves_two_points():
    elo = ratings.online_elo(frame([("A", "B", "model_a")]))
    assert elo["A"] == pytest.approx(1002.0, abs=1e-12)
    assert elo["B"] == pytest.approx(998.0, abs=1e-12)


def test_win_then_loss_by_hand():
    elo = ratings.online_elo(frame([("A", "B", "model_a"), ("A", "B", "model_b")]))
    assert E_AFTER_FIRST == pytest.approx(0.50575620841, abs=1e-11)
    assert elo["A"] == pytest.approx(1002.0 - 4 * E_AFTER_FIRST, abs=1e-9)
    assert elo["A"] == pytest.approx(999.97697516634, abs=1e-9)
    assert elo["B"] == pytest.approx(1000.02302483366, abs=1e-9)
    assert elo.index[0] == "B"  # highest rating first


def test_tie_is_half_a_win():
    elo = ratings.online_elo(frame([("A", "B", "model_a"), ("B", "A", "tie")]))
    # B is model_a of the tie: expects 1 - E_AFTER_FIRST, scores 0.5.
    assert elo["B"] == pytest.approx(998.0 + 4 * (0.5 - (1 - E_AFTER_FIRST)), abs=1e-9)
    assert elo["A"] == pytest.approx(1001.97697516634, abs=1e-9)


def test_tie_between_equals_changes_nothing():
    elo = ratings.online_elo(frame([("A", "B", "tie")]))
    assert elo.to_dict() == {"A": 1000.0, "B": 1000.0}


def test_parameters_are_honoured():
    elo = ratings.online_elo(frame([("A", "B", "model_a")]), k=32, initial=1500)
    assert elo["A"] == pytest.approx(1516.0)


def test_online_elo_equals_reference_loop_on_random_battles():
    battles = simulated_battles({f"m{i}": 900 + 25 * i for i in range(8)}, 3000, seed=3)
    ours = ratings.online_elo(battles)
    theirs = reference_online_elo(battles)
    pd.testing.assert_series_equal(ours.sort_index(), theirs.sort_index(), check_names=False, rtol=0, atol=1e-9)


def test_the_kernels_exp_is_within_an_ulp_of_libms_and_so_is_the_expected_score():
    # The kernels compute exp themselves so that it vectorises. Over rating gaps of any size a
    # leaderboard reaches, and at the edges of the range where it is used, it must be within one
    # unit in the last place of libm's; the expected score 1 / (1 + exp) then within 1e-15 of
    # libm's relatively (1 + exp can round to a tie, doubling a last-place difference).
    limit = ratings._FAST_EXP_LIMIT
    gaps = np.concatenate(
        [
            np.random.default_rng(0).uniform(-12.0, 12.0, 20_000),
            np.random.default_rng(1).uniform(36.7, 37.5, 2_000),  # where 1 + exp is a tie
            np.random.default_rng(2).uniform(-limit, limit, 2_000),
            [0.0, -0.0, 1e-300, -1e-300, 0.5 * math.log(2), limit - 1e-9, -limit + 1e-9],
        ]
    )
    ours = np.array([ratings._fast_exp(g) for g in gaps])
    libm = np.array([math.exp(g) for g in gaps])
    assert np.all(np.abs(ours - libm) <= np.spacing(libm))
    ours = np.array([ratings._expected_score(g, ratings._fast_expected_score(g)) for g in gaps])
    libm = np.array([1.0 / (1.0 + math.exp(g)) for g in gaps])
    np.testing.assert_allclose(ours, libm, rtol=1e-15, atol=0)


# A K that puts two ratings 1000 / alpha apart after one battle, alpha = ln(10) / 400: the next
# expected score is 1 / (1 + exp(+-1000)), beyond the range of the kernels' own exp.
K_FOR_A_GAP_OF_1000 = 1000 / (math.log(10) / 400)


def test_gaps_beyond_the_fast_exp_range_give_libm_expected_scores():
    # exactly 1 for the favourite, so a repeat win changes nothing, and 0 for the underdog, so an
    # upset is worth the whole K
    k = K_FOR_A_GAP_OF_1000
    battles = frame([("A", "B", "model_a"), ("A", "B", "model_a"), ("B", "A", "model_a")])
    elo = ratings.online_elo(battles, k=k)
    assert elo["B"] == pytest.approx(1000 + k / 2, rel=1e-15)
    assert elo["A"] == pytest.approx(1000 - k / 2, rel=1e-15)


def test_bootstrap_with_huge_k_equals_online_elo_on_the_same_draws():
    k = K_FOR_A_GAP_OF_1000
    battles = simulated_battles({"a": 1100, "b": 1000, "c": 900}, 300, seed=4)
    samples = ratings.bootstrap_elo_samples(battles, rounds=20, seed=3, k=k)
    # some round ends with two ratings further apart than the kernels' own exp reaches
    spread = samples.max(axis=1) - samples.min(axis=1)
    assert (spread * math.log(10) / 400 > ratings._FAST_EXP_LIMIT).any()
    indices = ratings.bootstrap_indices(len(battles), 20, seed=3)
    for r in range(20):
        expected = ratings.online_elo(battles.iloc[indices[:, r]], k=k)
        pd.testing.assert_series_equal(
            samples.iloc[r][expected.index], expected, check_names=False, rtol=1e-12, atol=1e-6
        )


def test_online_elo_depends_on_battle_order():
    battles = frame([("A", "B", "model_a"), ("A", "B", "model_b")])
    reversed_order = battles.iloc[::-1]
    assert ratings.online_elo(battles)["A"] < 1000 < ratings.online_elo(reversed_order)["A"]


def test_unknown_winner_is_rejected():
    with pytest.raises(ValueError, match="unknown winner"):
        ratings.online_elo(frame([("A", "B", "A")]))


@pytest.mark.parametrize("rounds", [6, 37])  # fewer rounds than a thread plays side by side, and not a multiple
def test_bootstrap_rounds_equal_reference_loop_on_the_same_draws(rounds):
    battles = simulated_battles({"a": 1100, "b": 1000, "c": 950, "d": 900}, 400, seed=5)
    samples = ratings.bootstrap_elo_samples(battles, rounds=rounds, seed=11)
    indices = ratings.bootstrap_indices(len(battles), rounds, seed=11)
    assert indices.shape == (len(battles), rounds)
    for r in range(rounds):
        expected = reference_online_elo(battles.iloc[indices[:, r]])
        got = samples.iloc[r]
        for model, value in expected.items():
            assert got[model] == pytest.approx(value, abs=1e-9)
        # a model the round never drew keeps the initial rating, as in FastChat's vectorised code
        for model in set(samples.columns) - set(expected.index):
            assert got[model] == 1000.0


def test_bootstrap_indices_are_uniform():
    indices = ratings.bootstrap_indices(10, 20000, seed=1)
    counts = np.bincount(indices.ravel(), minlength=10)
    assert counts.min() > 0.97 * indices.size / 10
    assert counts.max() < 1.03 * indices.size / 10


def test_bootstrap_is_deterministic_for_a_seed():
    battles = simulated_battles({"a": 1100, "b": 1000, "c": 900}, 500, seed=1)
    first = ratings.bootstrap_elo(battles, rounds=50, seed=7)
    again = ratings.bootstrap_elo(battles, rounds=50, seed=7)
    other = ratings.bootstrap_elo(battles, rounds=50, seed=8)
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["lower"], other["lower"])


def test_bootstrap_interval_contains_point_estimate():
    battles = simulated_battles({"a": 1150, "b": 1050, "c": 1000, "d": 900}, 4000, seed=2)
    table = ratings.bootstrap_elo(battles, rounds=300, seed=0).set_index("model")
    point = ratings.online_elo(battles)
    assert list(table.columns) == ["rating", "lower", "upper"]
    assert (table["lower"] <= table["rating"]).all() and (table["rating"] <= table["upper"]).all()
    for model, value in point.items():
        assert table.loc[model, "lower"] <= value <= table.loc[model, "upper"]


def test_bradley_terry_two_models_by_hand():
    # A scores 3 of 4 (two wins and two ties). In log-odds units (400 Elo points / ln 10 each) with
    # a gap g split evenly around 1000, the log-posterior is 3 log s(g) + log s(-g) - g^2 / (4 v),
    # s the logistic function and v the prior's variance, stationary where 3 - 4 s(g) = g / (2 v).
    # Without the prior the gap would be log 3 (400 log10 3 = 190.8 Elo points); the prior
    # pulls it in.
    battles = frame([("A", "B", "model_a"), ("B", "A", "model_b"), ("A", "B", "tie"), ("B", "A", "tie")])
    bt = bradley_terry.bradley_terry(battles)
    per_unit = 400 / math.log(10)
    variance = (BT_PRIOR_SD / per_unit) ** 2
    gap = brentq(lambda g: 3 - 4 / (1 + math.exp(-g)) - g / (2 * variance), 0, math.log(3)) * per_unit
    assert bt["A"] == pytest.approx(1000 + gap / 2, abs=1e-6)
    assert bt["B"] == pytest.approx(1000 - gap / 2, abs=1e-6)
    assert 0 < gap < 400 * math.log10(3)


def test_bradley_terry_ties_count_as_half_wins():
    # FastChat's older fit duplicated every battle and turned a tie into one win for each side;
    # two wins plus two ties must therefore fit exactly like three wins and one loss (the same
    # number of battles, so the prior weighs the same against them).
    with_tie = frame([("A", "B", "model_a"), ("A", "B", "tie"), ("B", "C", "model_a"), ("C", "B", "model_a")] * 2)
    duplicated = frame(
        [("A", "B", "model_a")] * 3 + [("A", "B", "model_b")] + [("B", "C", "model_a"), ("C", "B", "model_a")] * 2
    )
    pd.testing.assert_series_equal(
        bradley_terry.bradley_terry(with_tie).sort_index(),
        bradley_terry.bradley_terry(duplicated).sort_index(),
        atol=1e-4,
    )
    only_ties = bradley_terry.bradley_terry(frame([("A", "B", "tie")] * 3))
    assert only_ties["A"] == pytest.approx(only_ties["B"])


def test_bradley_terry_ignores_order_and_its_posterior_is_stationary():
    battles = simulated_battles({"a": 1080, "b": 1000, "c": 960, "d": 920}, 3000, seed=4)
    bt = bradley_terry.bradley_terry(battles)
    shuffled = bradley_terry.bradley_terry(battles.sample(frac=1.0, random_state=0))
    pd.testing.assert_series_equal(bt.sort_index(), shuffled.sort_index(), atol=1e-6)
    assert bt.mean() == pytest.approx(1000.0)
    # the posterior is stationary at the fit: observed minus expected half points, times ln 10
    # (a half point's log-odds per 400 Elo points), balance the prior's pull towards 1000
    counts = bradley_terry.pair_counts(battles)
    r = bt.reindex(counts.models).to_numpy()
    n = counts.low_wins + counts.ties + counts.high_wins
    expected_low = n / (1 + 10 ** ((r[counts.high] - r[counts.low]) / 400))
    observed_low = counts.low_wins + counts.ties / 2
    scores = np.bincount(counts.low, observed_low - expected_low, minlength=len(r))
    scores -= np.bincount(counts.high, observed_low - expected_low, minlength=len(r))
    pull = (r - 1000) / 400 * (400 / BT_PRIOR_SD) ** 2
    assert np.abs(math.log(10) * scores - pull).max() < 1e-3
    assert np.abs(pull).max() > 1e-2  # the prior is there, and this checks it


SIMULATED = {
    "reference": 1250,
    "llava": 1100,
    "adapter": 1060,
    "owl": 1020,
    "blip": 970,
    "minigpt": 900,
    "panda": 820,
}


def test_simulation_recovers_order_and_strength_gaps():
    # No ties here: ties drawn independently of strength would pull every gap towards zero,
    # so the fitted model would be right to disagree with these strengths.
    battles = simulated_battles(SIMULATED, 20000, seed=42, tie_rate=0.0)
    truth = pd.Series(SIMULATED, dtype=float)
    truth = truth - truth.mean() + 1000.0  # BT ratings are centred on the initial rating

    bt = bradley_terry.bradley_terry(battles)
    assert list(bt.index) == list(truth.sort_values(ascending=False).index)
    boot = bradley_terry.bootstrap_bradley_terry(battles, rounds=300, seed=0).set_index("model")
    assert list(boot.index) == list(bt.index)
    assert ((boot["lower"] <= bt[boot.index]) & (bt[boot.index] <= boot["upper"])).all()
    # Each 95% interval misses the truth one time in twenty; over seven models a miss is
    # expected one run in three (20 seeds tried: 14 with none, 6 with one), so allow one.
    covered = (boot["lower"] <= truth[boot.index]) & (truth[boot.index] <= boot["upper"])
    assert covered.sum() >= len(truth) - 1

    elo = ratings.bootstrap_elo(battles, rounds=200, seed=0)
    assert list(elo["model"]) == list(bt.index)


def test_bootstrap_bradley_terry_is_deterministic_and_count_based():
    battles = simulated_battles({"a": 1100, "b": 1000, "c": 900}, 2000, seed=9)
    first = bradley_terry.bootstrap_bradley_terry_samples(battles, rounds=20, seed=3)
    again = bradley_terry.bootstrap_bradley_terry_samples(battles, rounds=20, seed=3)
    pd.testing.assert_frame_equal(first, again)
    assert first.shape == (20, 3)
    assert np.allclose(first.mean(axis=1), 1000.0)


def battles_with_reference():
    rows = [
        ("ref", "x", "model_a"),
        ("x", "ref", "model_a"),
        ("ref", "x", "tie"),
        ("ref", "x", "model_a"),
        ("y", "ref", "model_b"),
        ("ref", "y", "model_b"),
        ("x", "y", "model_a"),
    ]
    categories = ["ocr", "ocr", "humor", "humor", "ocr", "humor", "ocr"]
    return frame(rows, instruction_category=categories)


def test_win_rate_vs_reference_counts_ties_apart():
    table = tables.win_rate_vs_reference(battles_with_reference(), reference_model="ref")
    x = table.set_index("model").loc["x"]
    assert (x["wins"], x["ties"], x["losses"], x["n"]) == (1, 1, 2, 4)
    assert x["win_rate"] == pytest.approx(0.25)
    y = table.set_index("model").loc["y"]
    assert (y["wins"], y["n"], y["win_rate"]) == (1, 2, 0.5)
    assert "ref" not in set(table["model"])
    assert list(table["model"]) == ["y", "x"]


def test_category_win_rates_is_model_by_category():
    wide = tables.category_win_rates(battles_with_reference(), reference_model="ref")
    assert wide.loc["x", "ocr"] == pytest.approx(0.5)
    assert wide.loc["x", "humor"] == pytest.approx(0.0)
    assert wide.loc["y", "humor"] == pytest.approx(1.0)
    assert wide.loc["y", "ocr"] == pytest.approx(0.0)
    assert list(wide.columns) == ["humor", "ocr"]


def test_category_win_rate_table_gives_every_cell_its_n_and_marks_empty_ones():
    battles = battles_with_reference()
    battles.loc[len(battles)] = ["z", "x", "model_a", "maths"]
    table = tables.category_win_rate_table(battles, reference_model="ref").set_index(["model", "instruction_category"])
    assert len(table) == 2 * 3  # x and y met the reference; three categories
    assert table.loc[("x", "ocr"), "n"] == 2 and table.loc[("x", "ocr"), "win_rate"] == pytest.approx(0.5)
    assert table.loc[("y", "maths"), "n"] == 0 and pd.isna(table.loc[("y", "maths"), "win_rate"])


def test_leaderboard_table_splits_single_and_multi_image():
    single = simulated_battles({"ref": 1200, "a": 1000, "b": 900}, 600, seed=1)
    multi = simulated_battles({"ref": 1200, "c": 950}, 100, seed=2)
    battles = pd.concat([single, multi], ignore_index=True)
    battles["is_multi_image"] = [False] * len(single) + [True] * len(multi)
    table = tables.leaderboard_table(battles, reference_model="ref", rounds=50)
    assert list(table.columns) == [
        "split",
        "model",
        "elo",
        "elo_lower",
        "elo_upper",
        "bt",
        "bt_lower",
        "bt_upper",
        "matches",
        "wins_vs_reference",
        "n_vs_reference",
        "win_rate_vs_reference",
    ]
    assert list(table["split"].unique()) == ["all-images", "single-image", "multi-image"]
    assert set(table.loc[table["split"] == "multi-image", "model"]) == {"ref", "c"}
    everything = table[table["split"] == "all-images"].set_index("model")
    assert set(everything.index) == {"ref", "a", "b", "c"}
    assert everything.loc["ref", "matches"] == (
        (battles["model_a"] == "ref") | (battles["model_b"] == "ref")
    ).sum()
    assert everything.loc["c", "bt"] == pytest.approx(bradley_terry.bradley_terry(battles)["c"], abs=1e-9)
    assert (everything["bt_lower"] <= everything["bt"]).all() and (everything["bt"] <= everything["bt_upper"]).all()
    row = table[(table["split"] == "single-image") & (table["model"] == "a")].iloc[0]
    a_games = single[(single["model_a"] == "a") | (single["model_b"] == "a")]
    assert row["matches"] == len(a_games)
    ref_row = table[(table["split"] == "single-image") & (table["model"] == "ref")].iloc[0]
    assert pd.isna(ref_row["win_rate_vs_reference"])
    assert row["elo_lower"] <= row["elo"] <= row["elo_upper"]


def test_leaderboard_table_without_split_column():
    battles = simulated_battles({"ref": 1200, "a": 1000}, 200, seed=1)
    table = tables.leaderboard_table(battles, reference_model="ref", rounds=20)
    assert "split" not in table.columns
    assert list(table["model"]) == ["ref", "a"]


def test_plots_return_png():
    battles = battles_with_reference()
    intervals = ratings.bootstrap_elo(battles, rounds=20)
    assert elo_interval_plot(intervals).startswith(b"\x89PNG")
    long = tables.category_win_rate_table(battles, reference_model="ref")
    assert category_heatmap(long).startswith(b"\x89PNG")
    board = tables.leaderboard_table(battles.assign(is_multi_image=False), reference_model="ref", rounds=20)
    assert elo_interval_plot(board).startswith(b"\x89PNG")
