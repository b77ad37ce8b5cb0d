from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    """The judge's verdict takes the API's name (JudgeJudgement, beside HumanJudgement), and the
    tournament's constraint loses the `study_` prefix left from when tournaments were studies."""

    dependencies = [
        ("annotation", "0024_battle_posterior_and_balanced_first_round"),
    ]

    operations = [
        migrations.RenameModel(old_name="Judgement", new_name="JudgeJudgement"),
        migrations.RemoveConstraint(model_name="tournament", name="study_judgements_per_pair_positive"),
        migrations.AddConstraint(
            model_name="tournament",
            constraint=models.CheckConstraint(condition=Q(judgements_per_pair__gte=1),
                                              name="tournament_judgements_per_pair_positive"),
        ),
    ]
