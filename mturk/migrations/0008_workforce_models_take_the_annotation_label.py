"""The six workforce models (annotation/models/workforce.py) take the annotation app label
(issue 40): they leave this app's state only; their tables stay as they are and are
annotation's from its migration 0037 on."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('mturk', '0007_study_platform_toloka'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveField(
                model_name='golditem',
                name='qualification',
            ),
            migrations.RemoveField(
                model_name='qualificationattempt',
                name='qualification',
            ),
            migrations.RemoveField(
                model_name='qualificationattempt',
                name='worker',
            ),
            migrations.RemoveField(
                model_name='workerqualification',
                name='qualification',
            ),
            migrations.RemoveField(
                model_name='workerblock',
                name='created_by',
            ),
            migrations.RemoveField(
                model_name='workerblock',
                name='worker',
            ),
            migrations.RemoveField(
                model_name='workerqualification',
                name='worker',
            ),
            migrations.DeleteModel(
                name='GoldAnswer',
            ),
            migrations.DeleteModel(
                name='GoldItem',
            ),
            migrations.DeleteModel(
                name='QualificationAttempt',
            ),
            migrations.DeleteModel(
                name='StageQualification',
            ),
            migrations.DeleteModel(
                name='WorkerBlock',
            ),
            migrations.DeleteModel(
                name='WorkerQualification',
            ),
        ]),
    ]
