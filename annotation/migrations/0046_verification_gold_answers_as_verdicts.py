"""A verification gold item's answer spelled as the verdict it names ("correct", "incorrect"), as
GoldItem.clean now keeps it: answers were scored case- and space-blind, but a stage weighing each
verifier by verdict counts their gold answers by the item's answer as spelled."""

from django.db import migrations


def answers_as_verdicts(apps, schema_editor):
    GoldItem = apps.get_model("annotation", "GoldItem")
    for item in GoldItem.objects.filter(qualification__stage="verification", kind="choice").only("answer"):
        if isinstance(item.answer, str) and item.answer != item.answer.strip().casefold():
            item.answer = item.answer.strip().casefold()
            item.save(update_fields=["answer"])


class Migration(migrations.Migration):
    dependencies = [("annotation", "0045_accuracy_by_verdict")]

    operations = [migrations.RunPython(answers_as_verdicts, migrations.RunPython.noop)]
