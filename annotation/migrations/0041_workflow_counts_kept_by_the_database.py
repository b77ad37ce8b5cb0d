from importlib import import_module

import django.db.models.deletion
from django.db import migrations, models

# The trigger builders of Table 2's kept counts, given this count's name and mark.
table2 = import_module("annotation.migrations.0039_table2_counts_kept_by_the_database")

# The workflow pages' kept counts (annotation/collection/workflow_counts.py) are right only while
# every change that reaches an instance's part in them marks the instance for counting again, as
# Table 2's are (migration 0039). What reaches an instance's part (workflow_counts.count_from_scratch):
# the instance added, deleted, moved or its status changed; a model response on it added, deleted,
# renamed or moved. Marked once per statement over its transition tables on PostgreSQL: an import
# writes thousands of instances or responses in one statement, and a mark per instance in one
# insert; SQLite has no transition tables, and marks row by row.
COUNTS = "annotation_workflowcount"


def _instance(row):
    return f"SELECT family_id AS family, id AS instance FROM annotation_instance WHERE id = {row}.instance_id"


def _itself(row):
    return f"SELECT {row}.family_id AS family, {row}.id AS instance"


# (table, event, when (of the row, as {old} and {new}), what it marks: SELECTs of family, instance)
TRIGGERS = [
    ("annotation_instance", "INSERT", "TRUE", [_itself("{new}")]),
    ("annotation_instance", "UPDATE",
     "{old}.family_id <> {new}.family_id OR {old}.status <> {new}.status", [_itself("{old}"), _itself("{new}")]),
    ("annotation_instance", "DELETE", "TRUE", [_itself("{old}")]),
    ("annotation_modelresponse", "INSERT", "TRUE", [_instance("{new}")]),
    ("annotation_modelresponse", "UPDATE",
     "{old}.model_name <> {new}.model_name OR {old}.instance_id <> {new}.instance_id",
     [_instance("{old}"), _instance("{new}")]),
    # A response deleted with its instance finds no instance: the instance's own delete marks it.
    ("annotation_modelresponse", "DELETE", "TRUE", [_instance("{old}")]),
]


def _name(table, event):
    return f"{table}_{event.lower()}_marks_workflow"


def _mark(marked_select):
    return (f"INSERT INTO {COUNTS} (family_id, instance_id, stale, instances, responses) "
            "SELECT family, instance, TRUE, '{}', '{}' "
            f"FROM (SELECT DISTINCT family, instance FROM ({marked_select}) AS found) AS marked")


def _postgresql(*spec):
    return table2.by_statement(*spec, name=_name, mark=_mark)


def _sqlite(*spec):
    return table2.by_row_on_sqlite(*spec, name=_name, mark=_mark)


def create_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for spec in TRIGGERS:
        for statement in {"postgresql": _postgresql, "sqlite": _sqlite}[vendor](*spec):
            schema_editor.execute(statement, params=None)
    # Counts kept from now on start from every instance marked: the first reader (or `manage.py
    # kept_counts`) counts them.
    schema_editor.execute(_mark("SELECT family_id AS family, id AS instance FROM annotation_instance"), params=None)


def drop_triggers(apps, schema_editor):
    table2.drop(schema_editor, TRIGGERS, _name)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0040_new_workers_get_gold_more_often'),
    ]

    operations = [
        migrations.CreateModel(
            name='WorkflowCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('stale', models.BooleanField(default=False)),
                ('instances', models.JSONField(default=dict)),
                ('responses', models.JSONField(default=dict)),
                ('family', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotation.instructionfamily')),
                ('instance', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='annotation.instance')),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('instance__isnull', True), ('stale', True), _connector='OR'), fields=['family'], name='workflow_count_sums_and_marks')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('instance__isnull', True)), fields=('family',), name='workflow_count_once_per_family'), models.UniqueConstraint(condition=models.Q(('stale', False)), fields=('instance',), name='workflow_count_once_per_instance'), models.CheckConstraint(condition=models.Q(('stale', False), ('instance__isnull', False), _connector='OR'), name='workflow_count_marks_an_instance')],
            },
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
