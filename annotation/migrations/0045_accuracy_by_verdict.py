"""Verification weighed by verdict (issue 41): the worker model keeps each worker's accuracy on
items of each truth (`WorkerReliability.by_truth`) and how common each label is (`LabelShare`), and
a stage may stop on them (`StageConfig.Stopping.WORKER_ACCURACY_BY_VERDICT`). Reliabilities fitted
before this have no accuracy by truth and weigh as one accuracy until the job next fits."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0044_statement_marks_planned_for_each_statement'),
    ]

    operations = [
        migrations.AddField(
            model_name='workerreliability',
            name='by_truth',
            field=models.JSONField(blank=True, default=dict, help_text='Dawid-Skene only: how often the worker is right on items whose truth is each label (the diagonal of their confusion matrix), by label.'),
        ),
        migrations.AlterField(
            model_name='stageconfig',
            name='stopping',
            field=models.CharField(choices=[('agreement', 'Enough verifiers agree'), ('worker_accuracy', 'Probable enough, each verifier weighed by their accuracy'), ('accuracy_by_verdict', 'Probable enough, weighed by accuracy on each verdict')], default='agreement', help_text="With “ask until decided”: stop when enough verifiers agree (“agree to decide”), or weigh each verifier by how often they are right (from their gold answers, else from the worker model once it has seen enough of their answers, else the “prior accuracy”) and stop once the verdict is at least as probable as the “posterior threshold”. Weighed, one answer of a verifier known to be very good can decide, and a poor verifier's answers ask for more, up to the overlap; the verdict is the more probable one. Weighed by verdict, a verifier's accuracy on sound and on flawed references counts apart (many pass a flawed one more often than they fail a sound one), starting from how common sound references are, as the worker model estimates it: on real yes/no crowds it bought the same accuracy with fewer answers, and it is as good as that estimate. Replay your last campaign to choose (manage.py replay_answers --family NAME).", max_length=20, verbose_name='decided when'),
        ),
        migrations.CreateModel(
            name='LabelShare',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('stage', models.CharField(choices=[('instruction_generation', 'Instruction generation'), ('caption', 'Instruction-conditioned caption'), ('verification', 'Verification'), ('pairwise', 'Pairwise preference')], max_length=30)),
                ('model', models.CharField(choices=[('dawid_skene', 'Dawid-Skene'), ('glad', 'GLAD'), ('mace', 'MACE'), ('noisy_bt', 'Noisy Bradley-Terry')], max_length=20)),
                ('label', models.CharField(max_length=50)),
                ('share', models.FloatField()),
                ('fitted_at', models.DateTimeField()),
                ('family', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotation.instructionfamily')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('stage', 'family', 'model', 'label'), name='label_share_unique', nulls_distinct=False), models.CheckConstraint(condition=models.Q(('share__gte', 0), ('share__lte', 1)), name='label_share_is_a_share')],
            },
        ),
    ]
