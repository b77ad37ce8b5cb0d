from django.db import migrations, models


def mark_rows_that_sent_nothing(apps, schema_editor):
    """Rows written before this field by actions that never called a platform: places on Connect
    and Prolific (recorded here only), blocks there (no block API) and everything in-house."""
    AuditLog = apps.get_model("mturk", "AuditLog")
    studies = ["cloudresearch", "prolific"]
    AuditLog.objects.filter(action__in=["publish", "block"], platform__in=studies).update(
        sent_to_platform=False)
    AuditLog.objects.filter(platform="local").update(sent_to_platform=False)


class Migration(migrations.Migration):

    dependencies = [
        ('mturk', '0003_worker_countries_may_be_empty'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditlog',
            name='sent_to_platform',
            field=models.BooleanField(default=True, help_text='Whether any request of this action reached the platform.'),
        ),
        migrations.AlterField(
            model_name='auditlog',
            name='action',
            field=models.CharField(choices=[('publish', 'Publish'), ('sync', 'Sync'), ('approve', 'Approve'), ('reject', 'Reject'), ('bonus', 'Bonus'), ('block', 'Block'), ('notify', 'Notify'), ('expire', 'Expire'), ('extend', 'Extend'), ('qualify', 'Grant qualification')], max_length=10),
        ),
        migrations.AlterField(
            model_name='crowdstudy',
            name='places_published',
            field=models.PositiveIntegerField(default=0, help_text="CloudResearch / Prolific: places recorded here against the budget. Nothing is sent: open them on the platform's own site."),
        ),
        migrations.RunPython(mark_rows_that_sent_nothing, migrations.RunPython.noop),
    ]
