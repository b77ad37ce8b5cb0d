"""Table 2's mark of a changed instance, once per statement over its transition tables rather than
once per row: the worker-model job settles ten thousand instances in one UPDATE, and a call of the
row trigger's function per instance was more than half of that statement's time (issue 41). On
SQLite, which has no transition tables, the row trigger stays."""

from importlib import import_module

from django.db import migrations

table2 = import_module("annotation.migrations.0039_table2_counts_kept_by_the_database")
INSTANCE_UPDATE = next(spec for spec in table2.TRIGGERS if spec[:2] == ("annotation_instance", "UPDATE"))


def _replace(schema_editor, statements):
    if schema_editor.connection.vendor != "postgresql":
        return
    table, event = INSTANCE_UPDATE[:2]
    name = table2._name(table, event)
    schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {name}()")
    for statement in statements:
        schema_editor.execute(statement, params=None)


def once_per_statement(apps, schema_editor):
    _replace(schema_editor, table2.by_statement(*INSTANCE_UPDATE))


def once_per_row(apps, schema_editor):
    _replace(schema_editor, table2._postgresql(*INSTANCE_UPDATE))


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0041_workflow_counts_kept_by_the_database'),
    ]

    operations = [
        migrations.RunPython(once_per_statement, once_per_row),
    ]
