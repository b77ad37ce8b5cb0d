"""The six workforce models take the annotation app label (issue 40) and keep their tables
(mturk_<model>): they enter this app's state only. Their content types are relabelled rather
than made anew, so the permissions granted on them, and the audit trail's rows about them, stay."""

import django.core.validators
import django.db.models.deletion
from decimal import Decimal
from django.conf import settings
from django.db import migrations, models


MOVED = ["workerblock", "stagequalification", "golditem", "qualificationattempt", "goldanswer",
         "workerqualification"]


def relabel_content_types(apps, schema_editor, *, source="mturk", target="annotation"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    # A model whose new label already has a content type (made before this ran) keeps that one.
    made = ContentType.objects.filter(app_label=target, model__in=MOVED).values_list("model", flat=True)
    ContentType.objects.filter(app_label=source, model__in=MOVED).exclude(model__in=list(made)).update(
        app_label=target)


def label_back(apps, schema_editor):
    relabel_content_types(apps, schema_editor, source="annotation", target="mturk")


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0036_worker_platform_toloka'),
        ('mturk', '0008_workforce_models_take_the_annotation_label'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='StageQualification',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('stage', models.CharField(choices=[('instruction_generation', 'Instruction generation'), ('caption', 'Instruction-conditioned caption'), ('verification', 'Verification'), ('pairwise', 'Pairwise preference')], max_length=30, unique=True)),
                        ('name', models.CharField(max_length=200)),
                        ('description', models.TextField(help_text='Shown to workers before they start.')),
                        ('test_size', models.PositiveSmallIntegerField(default=5, validators=[django.core.validators.MinValueValidator(5), django.core.validators.MaxValueValidator(10)])),
                        ('pass_score', models.DecimalField(decimal_places=3, default=Decimal('0.800'), help_text='Share of gold items right to qualify.', max_digits=4)),
                        ('live_accuracy_bar', models.DecimalField(decimal_places=3, default=Decimal('0.600'), help_text='Below this share of live gold items right, the worker is paused.', max_digits=4)),
                        ('live_window', models.PositiveSmallIntegerField(default=10, help_text='Live accuracy counts the last this many gold answers.')),
                        ('live_min_answers', models.PositiveSmallIntegerField(default=5, help_text='No pause before this many live gold answers.')),
                        ('live_gold_every', models.PositiveSmallIntegerField(default=10, help_text='Mix one gold item into about every this many live tasks.')),
                        ('retake_after_hours', models.PositiveIntegerField(default=24)),
                        ('mturk_qualification_type_id', models.CharField(blank=True, editable=False, max_length=64)),
                        ('mturk_environment', models.CharField(blank=True, editable=False, max_length=12)),
                    ],
                    options={
                        'db_table': 'mturk_stagequalification',
                        'constraints': [models.CheckConstraint(condition=models.Q(('test_size__gte', 5), ('test_size__lte', 10)), name='qualification_test_five_to_ten_items')],
                    },
                ),
                migrations.CreateModel(
                    name='QualificationAttempt',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('item_ids', models.JSONField(help_text='The gold items of this attempt, in the order shown.')),
                        ('status', models.CharField(choices=[('started', 'Started'), ('pending_review', "Waiting for a researcher's review"), ('passed', 'Passed'), ('failed', 'Failed')], default='started', max_length=16)),
                        ('score', models.DecimalField(blank=True, decimal_places=3, max_digits=4, null=True)),
                        ('started_at', models.DateTimeField(auto_now_add=True)),
                        ('submitted_at', models.DateTimeField(blank=True, null=True)),
                        ('worker', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='qualification_attempts', to='annotation.worker')),
                        ('qualification', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='attempts', to='annotation.stagequalification')),
                    ],
                    options={
                        'db_table': 'mturk_qualificationattempt',
                        'ordering': ['-started_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='GoldItem',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('choice', 'Choice with a known answer'), ('free_text', 'Free text reviewed by a researcher')], default='choice', max_length=10)),
                        ('content', models.JSONField(help_text='What the worker sees, e.g. {"instruction": ..., "image_url": ..., "caption": ..., "response": ...}.')),
                        ('question', models.TextField()),
                        ('options', models.JSONField(blank=True, default=list, help_text='Choices as a JSON list, e.g. ["correct", "incorrect"].')),
                        ('answer', models.JSONField(blank=True, help_text='The right choice (choice items).', null=True)),
                        ('explanation', models.TextField(blank=True, help_text='Shown to the worker after they answer.')),
                        ('in_test', models.BooleanField(default=True)),
                        ('in_live_work', models.BooleanField(default=True)),
                        ('active', models.BooleanField(default=True)),
                        ('qualification', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gold_items', to='annotation.stagequalification')),
                    ],
                    options={
                        'db_table': 'mturk_golditem',
                        'ordering': ['id'],
                    },
                ),
                migrations.CreateModel(
                    name='WorkerBlock',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('reason', models.TextField()),
                        ('active', models.BooleanField(default=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('worker', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='blocks', to='annotation.worker')),
                    ],
                    options={
                        'db_table': 'mturk_workerblock',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='WorkerQualification',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('status', models.CharField(choices=[('qualified', 'Qualified'), ('paused', 'Paused: live accuracy below the bar')], default='qualified', max_length=10)),
                        ('test_score', models.DecimalField(decimal_places=3, max_digits=4)),
                        ('live_accuracy', models.DecimalField(blank=True, decimal_places=3, max_digits=4, null=True)),
                        ('live_answers', models.PositiveIntegerField(default=0)),
                        ('granted_at', models.DateTimeField(auto_now_add=True)),
                        ('paused_at', models.DateTimeField(blank=True, null=True)),
                        ('note', models.TextField(blank=True)),
                        ('mturk_granted', models.BooleanField(default=False, help_text='The MTurk qualification has been associated with the worker.')),
                        ('qualification', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='worker_qualifications', to='annotation.stagequalification')),
                        ('worker', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='qualifications', to='annotation.worker')),
                    ],
                    options={
                        'db_table': 'mturk_workerqualification',
                    },
                ),
                migrations.CreateModel(
                    name='GoldAnswer',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('source', models.CharField(choices=[('test', 'Qualification test'), ('live', 'Mixed into live work')], max_length=4)),
                        ('answer', models.JSONField()),
                        ('correct', models.BooleanField(blank=True, help_text='Empty until reviewed (free text).', null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('reviewed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('worker', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='gold_answers', to='annotation.worker')),
                        ('item', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='answers', to='annotation.golditem')),
                        ('attempt', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='answers', to='annotation.qualificationattempt')),
                    ],
                    options={
                        'db_table': 'mturk_goldanswer',
                        'ordering': ['id'],
                        'constraints': [models.UniqueConstraint(condition=models.Q(('attempt__isnull', False)), fields=('attempt', 'item'), name='gold_answer_once_per_attempt')],
                    },
                ),
                migrations.AddConstraint(
                    model_name='qualificationattempt',
                    constraint=models.UniqueConstraint(condition=models.Q(('status', 'started')), fields=('qualification', 'worker'), name='one_open_qualification_attempt'),
                ),
                migrations.AddConstraint(
                    model_name='golditem',
                    constraint=models.CheckConstraint(condition=models.Q(('kind', 'free_text'), ('answer__isnull', False), _connector='OR'), name='choice_gold_item_has_answer'),
                ),
                migrations.AddConstraint(
                    model_name='workerqualification',
                    constraint=models.UniqueConstraint(fields=('qualification', 'worker'), name='worker_qualification_unique'),
                ),
            ],
            database_operations=[migrations.RunPython(relabel_content_types, label_back)],
        ),
    ]
