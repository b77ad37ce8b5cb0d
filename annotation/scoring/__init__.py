"""Scoring the judgements (VisIT-Bench §4, Tables 3-4, Figs. 8-9): the battles as the scoring
functions take them (battles), Elo and Bradley-Terry ratings and win-rates (ratings), agreement
between judges and the crowd (agreement), rubric scores per model and criterion and their rank
correlation with the ratings (rubrics), the leaderboard computed once per state of the
judgements (leaderboard) by a background job that a fingerprint of the judgements keeps current
(freshness), and its figures (plots)."""

from typing import NamedTuple

# Here rather than in leaderboard.py, so that pages which only name them (the API's defaults, the
# dashboard's warning) do not import the scientific stack into every web worker.
DEFAULT_ROUNDS = 1000
# The crowd's own board, beside one per judge run.
HUMAN_KEY = "human"
# Online Elo with K=4 moves a rating at most 4 points a match, so a model with fewer matches than
# this cannot get far from 1000 whatever its results: its bootstrap interval is narrow because
# the rating barely moved, not because it is known. Its rows carry a warning.
MIN_MATCHES = 100
# Bradley-Terry is fitted with a Gaussian prior on every rating, centred on the initial rating
# with this standard deviation in Elo points (bradley_terry.py): 400 points is the scale's own
# unit, the gap at which the stronger model is expected to win 10 to 1. Without it a model that
# won (or lost) every match has no finite rating, and 24 judgements gave 6829 and -4781.
BT_PRIOR_SD = 400.0
# A model with fewer matches is "not yet rated" on Bradley-Terry's column: even at even odds its
# rating would be uncertain by about +-200 points or more (95%), half the prior's own spread.
MIN_RATED_MATCHES = 10

# Every rating starts here (ratings.py, bradley_terry.py's prior).
INITIAL_RATING = 1000.0
# Splits of the leaderboard table (column ``split``): all battles rated together, as in the
# "All" rows of VisIT-Bench Table 4, then the single- and multi-image battles rated apart.
ALL_IMAGES, SINGLE_IMAGE, MULTI_IMAGE = "all-images", "single-image", "multi-image"
# The rubric row of every criterion together (rubrics.py).
ALL_RUBRICS = "All rubrics"
# Spearman's rho of fewer models than this is no ranking worth a number (rubrics.py).
MIN_MODELS = 3


class AlphaResult(NamedTuple):
    """Krippendorff's alpha and what it rests on (agreement.nominal_alpha computes it)."""

    alpha: float | None
    units: int
    answers: int

    def text(self, unit_name):
        """"α 0.62 over 40 references (120 answers)", or why there is no alpha."""
        rests_on = f"{self.units} {unit_name}{'' if self.units == 1 else 's'} ({self.answers} answers)"
        if self.alpha is not None:
            return f"α {self.alpha:.2f} over {rests_on}"
        if not self.units:
            return f"α –: no {unit_name} has two answers yet"
        return f"α –: every answer over {rests_on} is the same, so there is no disagreement to measure"
