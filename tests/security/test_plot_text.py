"""Names that matplotlib would read as TeX are drawn as text (issue 10, finding 4)."""

import pandas as pd
import pytest

from annotation.scoring import plots

NAMES = ["$x^$", "$\\frac{", "a $b$ c", "$$", "\\$", "_{^}", "$\\undefinedcommand$", "<script>"]


@pytest.mark.parametrize("name", NAMES)
def test_interval_plot_draws_any_model_name(name):
    table = pd.DataFrame({"model": [name, "other"], "rating": [1010.0, 990.0], "lower": [1000.0, 980.0],
                          "upper": [1020.0, 1000.0]})
    assert plots.elo_interval_plot(table, title=f"Judge {name}").startswith(b"\x89PNG")


@pytest.mark.parametrize("name", NAMES)
def test_category_heatmap_draws_any_model_and_category_name(name):
    table = pd.DataFrame({"model": [name, name], "instruction_category": [name, "ocr"], "n": [2, 0],
                          "win_rate": [0.5, None]})
    assert plots.category_heatmap(table, title=name).startswith(b"\x89PNG")
