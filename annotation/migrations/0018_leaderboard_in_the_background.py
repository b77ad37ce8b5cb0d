"""The leaderboard is computed by a background job, and its fingerprint reads when a judgement
was last changed (an edit in the admin); a stored result says how many judgements it came from.

Existing judgements get the migration's time as their last change (one value, so PostgreSQL adds
the column without rewriting the table's rows one by one).
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0017_ask_until_decided'),
    ]

    operations = [
        migrations.AddField(
            model_name='humanjudgement',
            name='updated_at',
            field=models.DateTimeField(auto_now=True),
        ),
        migrations.AddField(
            model_name='judgement',
            name='updated_at',
            field=models.DateTimeField(auto_now=True),
        ),
        migrations.AddField(
            model_name='leaderboardresult',
            name='judgements',
            field=models.PositiveIntegerField(default=0, help_text='Human and judge judgements it was computed from.'),
        ),
    ]
