from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0030_judgements_in_order_per_tournament_and_run"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="workunit",
            index=models.Index(fields=["family", "stage", "status", "id"], name="work_unit_family_queue_idx"),
        ),
        migrations.AddIndex(
            model_name="assignment",
            index=models.Index(fields=["worker", "status"], name="assignment_worker_status_idx"),
        ),
    ]
