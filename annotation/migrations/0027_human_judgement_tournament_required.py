import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0026_human_judgement_tournament"),
    ]

    operations = [
        migrations.AlterField(
            model_name="humanjudgement",
            name="tournament",
            field=models.ForeignKey(editable=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="human_judgements", to="annotation.tournament"),
        ),
    ]
