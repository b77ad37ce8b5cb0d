"""The platform's id of what a worker took (MTurk HIT, Prolific study, Connect project) was called
platform_task_id, but "task" is a Celery job in this code; the column follows the new name."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0009_preference_study_is_tournament"),
    ]

    operations = [
        migrations.RenameField("assignment", "platform_task_id", "platform_listing_id"),
    ]
