"""Each kind of figure reads one way wherever it is shown (annotation/figures.py, issue 39)."""

from decimal import Decimal

import pytest

from annotation.figures import dollars, duration, number_text


@pytest.mark.parametrize(("value", "form", "text"), [
    (-0.0001, "{:.2f}", "0.00"), (-0.0, "{:.2f}", "0.00"), (-0.0004, "{:.1%}", "0.0%"), (-0.3, "{:.2f}", "-0.30"),
    (0.25, "{:.2f}", "0.25"), (None, "{:.2f}", ""),
])
def test_no_figure_reads_as_a_negative_zero(value, form, text):
    assert number_text(value, form) == text


@pytest.mark.parametrize(("amount", "unpriced", "text"), [
    (Decimal("0.084"), 0, "$0.0840"), (Decimal(0), 0, "$0.0000"), (Decimal(0), 2, "price unknown"),
    (Decimal("1.5"), 1, "$1.5000 + 1 call of unknown price"), (None, 3, "price unknown"),
])
def test_a_cost_says_when_its_price_is_unknown(amount, unpriced, text):
    assert dollars(amount, unpriced=unpriced) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (None, "–"), (4.4, "4 s"), (59.6, "1 min 00 s"), (228.1511, "3 min 48 s"), (7500, "2 h 05 min"),
])
def test_a_duration_is_rounded_and_in_units(seconds, text):
    assert duration(seconds) == text
