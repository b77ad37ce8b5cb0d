"""Verified instances whose reference_output was left empty hold their verified reference.

An imported sheet's row rated correct without a reference_output of its own (396 rows of the
published single-image sheet) was verified without one, so it took part in no battle and no
export said what its reference was. Such instances get the text of their latest reference
verified correct, as annotation.collection.verification.verify_instance now gives every
verified instance.
"""

from django.db import migrations
from django.db.models import Exists, OuterRef, Subquery


def fill_verified_references(apps, schema_editor):
    Instance = apps.get_model("annotation", "Instance")
    Reference = apps.get_model("annotation", "Reference")
    correct = Reference.objects.filter(instance=OuterRef("pk"), verdict="correct")
    Instance.objects.filter(status="verified", reference_output__regex=r"^\s*$").filter(Exists(correct)).update(
        reference_output=Subquery(correct.order_by("-id").values("text")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0014_review_and_adjudication"),
    ]

    operations = [
        migrations.RunPython(fill_verified_references, migrations.RunPython.noop),
    ]
