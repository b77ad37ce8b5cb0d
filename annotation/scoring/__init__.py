"""Scoring the judgements (VisIT-Bench §4, Tables 3-4, Figs. 8-9): the battles as the scoring
functions take them (battles), Elo and Bradley-Terry ratings and win-rates (ratings), agreement
between judges and the crowd (agreement), the leaderboard computed once per state of the
judgements (leaderboard), and its figures (plots)."""
