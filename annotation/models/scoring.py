"""Scores computed from judgements and kept."""

from django.db import models

from annotation.model_checks import StorableJSONField
from annotation.models.preferences import Tournament


class LeaderboardResult(models.Model):
    """A tournament's leaderboard as computed once by its background job (annotation/scoring/freshness.py), kept so
    the dashboard, its figures, the API and the command all show the same numbers without rerunning the
    bootstrap. ``data_key`` is the fingerprint of the judgements it was computed from and the parameters,
    so a new or changed judgement makes a new key: the stored result is then shown as older than the
    judgements while the job computes the next one. One row per state: the unique constraint makes a
    second computation of the same state store nothing."""

    tournament = models.ForeignKey(Tournament, on_delete=models.CASCADE, related_name="leaderboard_results")
    criterion = models.CharField(max_length=40)
    rounds = models.PositiveIntegerField()
    data_key = models.CharField(max_length=64)
    result = StorableJSONField()
    computed_at = models.DateTimeField(auto_now_add=True)
    seconds = models.FloatField(help_text="How long the computation took.")
    judgements = models.PositiveIntegerField(default=0, help_text="Human and judge judgements it was computed from.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tournament", "criterion", "rounds", "data_key"],
                                    name="leaderboard_result_unique_per_data"),
        ]

    def __str__(self):
        return f"Leaderboard of {self.tournament} ({self.criterion}, {self.rounds} rounds)"
