"""Each human judgement names its battle's tournament, so a tournament's judgements are counted from
one index. The column is added empty and filled from the battles in one UPDATE; the next migration
requires it (in a transaction of its own: PostgreSQL does not alter a table whose deferred foreign
key checks are still pending)."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill_from_battles(apps, schema_editor):
    HumanJudgement = apps.get_model("annotation", "HumanJudgement")
    Battle = apps.get_model("annotation", "Battle")
    HumanJudgement.objects.update(
        tournament_id=Subquery(Battle.objects.filter(pk=OuterRef("battle_id")).values("tournament_id")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0025_judge_judgement_one_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="humanjudgement",
            name="tournament",
            field=models.ForeignKey(editable=False, null=True, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="human_judgements", to="annotation.tournament"),
        ),
        migrations.RunPython(fill_from_battles, migrations.RunPython.noop),
    ]
