"""Caption units keyed by the instance's caption round, surplus units flagged and closed.

The repair (annotation/crowdwork/surplus.py) prints what it found; `manage.py surplus_work`
reports it again at any time.
"""

from django.db import migrations, models


def repair_units(apps, schema_editor):
    from annotation.crowdwork.surplus import repair

    report = repair(apps)
    if report.found_anything:
        print("\n  Work units repaired (manage.py surplus_work reports them again):")
        for line in report.lines():
            print(f"    {line}")


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0011_judgement_says_whose'),
    ]

    operations = [
        migrations.AddField(
            model_name='instance',
            name='caption_round',
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.AddField(
            model_name='workunit',
            name='surplus',
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(repair_units, migrations.RunPython.noop),
    ]
