"""The audit trail recorded endpoints' signing secrets before they were write-only: they leave it."""

from django.db import migrations


def drop_secrets(apps, schema_editor):
    LogEntry = apps.get_model("auditlog", "LogEntry")
    ContentType = apps.get_model("contenttypes", "ContentType")
    endpoint_type = ContentType.objects.filter(app_label="webhooks", model="endpoint").first()
    if endpoint_type is None:
        return
    for entry in LogEntry.objects.filter(content_type=endpoint_type).iterator():
        changes = entry.changes if isinstance(entry.changes, dict) else None
        if changes and "secret" in changes:
            changes.pop("secret")
            entry.changes = changes
            entry.save(update_fields=["changes"])


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0002_outbound_address_check"),
        ("auditlog", "0017_add_actor_email"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(drop_secrets, migrations.RunPython.noop)]
