"""A model response records when it was last changed (an edit of its text in the admin), which the
leaderboard's fingerprint reads: the judge report's length bias counts the response's tokens. The
fingerprint also reads the judgements a work state leaves out, found through an index on it.

Existing responses get the migration's time as their last change (one value, so PostgreSQL adds
the column without rewriting the table's rows one by one).
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0022_research_groups'),
    ]

    operations = [
        migrations.AddField(
            model_name='modelresponse',
            name='updated_at',
            field=models.DateTimeField(auto_now=True),
        ),
        migrations.AddIndex(
            model_name='assignment',
            index=models.Index(fields=['work_state'], name='assignment_work_state_idx'),
        ),
    ]
