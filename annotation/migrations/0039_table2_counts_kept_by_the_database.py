import django.db.models.deletion
from django.db import migrations, models

# Table 2's kept counts (annotation/collection/table2_counts.py) are right only while every change
# that reaches an instance's part in them marks the instance for counting again. Triggers make the
# mark in the change's own transaction, whichever code makes it: a submit, review, the worker-model
# job's bulk update, an import, the admin, a shell. What reaches an instance's part
# (table2_counts.count_from_scratch): a decided reference's verdict, problems, decider, source,
# model and caption; its caption's answer rejected or taken back; the instance verified, discarded,
# moved or deleted; an image added or removed; its family made single- or multi-image.
COUNTS = "annotation_table2count"
DECIDED = "('correct', 'incorrect')"
ENDED = "('verified', 'discarded')"


def _instance(row):
    return f"SELECT family_id AS family, id AS instance FROM annotation_instance WHERE id = {row}.instance_id"


def _changed(*columns):
    return " OR ".join(f"{{old}}.{column} IS DISTINCT FROM {{new}}.{column}" for column in columns)


def _decided_reference_of(row):
    return (f"EXISTS (SELECT 1 FROM annotation_reference WHERE instance_id = {row}.instance_id "
            f"AND verdict IN {DECIDED})")


def _references_written_from(caption_match):
    return ("SELECT i.family_id AS family, i.id AS instance FROM annotation_reference r "
            f"JOIN annotation_instance i ON i.id = r.instance_id WHERE {caption_match}")


# (table, event, when (of the row, as {old} and {new}), what it marks: SELECTs of family, instance)
TRIGGERS = [
    ("annotation_reference", "INSERT", f"{{new}}.verdict IN {DECIDED}", [_instance("{new}")]),
    ("annotation_reference", "DELETE", f"{{old}}.verdict IN {DECIDED}", [_instance("{old}")]),
    ("annotation_reference", "UPDATE",
     _changed("verdict", "problem_in_caption", "problem_in_response", "decided_by", "source", "model",
              "caption_id", "instance_id"),
     [_instance("{old}"), _instance("{new}")]),
    ("annotation_instance", "UPDATE",
     f"{{old}}.family_id <> {{new}}.family_id OR ({{old}}.status <> {{new}}.status "
     f"AND ({{old}}.status IN {ENDED} OR {{new}}.status IN {ENDED}))",
     ["SELECT {old}.family_id AS family, {old}.id AS instance",
      "SELECT {new}.family_id AS family, {new}.id AS instance"]),
    ("annotation_instance", "DELETE", "TRUE", ["SELECT {old}.family_id AS family, {old}.id AS instance"]),
    ("annotation_instanceimage", "INSERT", _decided_reference_of("{new}"), [_instance("{new}")]),
    ("annotation_instanceimage", "DELETE", _decided_reference_of("{old}"), [_instance("{old}")]),
    ("annotation_instanceimage", "UPDATE", _changed("instance_id"), [_instance("{old}"), _instance("{new}")]),
    # The instances with a part in the family's counts.
    ("annotation_instructionfamily", "UPDATE", _changed("is_multi_image"),
     [f"SELECT family_id AS family, instance_id AS instance FROM {COUNTS} "
      "WHERE family_id = {new}.id AND instance_id IS NOT NULL AND NOT stale"]),
    ("annotation_assignment", "UPDATE", "({old}.work_state = 'rejected') <> ({new}.work_state = 'rejected')",
     [_references_written_from("r.caption_id IN (SELECT id FROM annotation_caption WHERE assignment_id = {new}.id)")]),
    ("annotation_caption", "UPDATE", _changed("assignment_id"),
     [_references_written_from("r.caption_id = {new}.id")]),
]


def _name(table, event):
    return f"{table}_{event.lower()}_marks_table2"


def _mark(marked_select):
    return (f'INSERT INTO {COUNTS} (family_id, instance_id, multi, stale, "references", correct, '
            "problem_in_caption, problem_in_response, verified, ended, decided_by) "
            "SELECT family, instance, FALSE, TRUE, 0, 0, 0, 0, 0, 0, '{}' "
            f"FROM (SELECT DISTINCT family, instance FROM ({marked_select}) AS found) AS marked")


# Written to in bulk (the worker-model job decides references a thousand at a time): marked once
# per statement. Other tables are marked row by row, where a trigger's WHEN skips a row that
# changed nothing Table 2 counts without calling the function (a lease renewed, a caption stored).
BY_STATEMENT = ("annotation_reference",)


def _postgresql(table, event, when, marks):
    name = _name(table, event)
    if table not in BY_STATEMENT:
        condition = when.format(old="OLD", new="NEW")
        select = " UNION ALL ".join(mark.format(old="OLD", new="NEW") for mark in marks)
        # A trigger's WHEN may not hold a subquery: such a condition is asked in the function.
        asked_inside = "SELECT" in condition
        body = f"IF {condition} THEN {_mark(select)}; END IF;" if asked_inside else f"{_mark(select)};"
        return [
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} RETURN NULL; END $$",
            f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW "
            + ("" if asked_inside else f"WHEN ({condition}) ") + f"EXECUTE FUNCTION {name}()",
        ]
    return by_statement(table, event, when, marks)


def by_statement(table, event, when, marks, *, name=_name, mark=_mark):
    """The trigger marking over the statement's transition tables: a bulk update of thousands of
    rows writes one mark per instance in one insert. `name` and `mark` make another kept count's
    trigger (migration 0041's)."""
    name = name(table, event)
    rows = {"INSERT": "new_rows n", "DELETE": "old_rows o",
            "UPDATE": "new_rows n JOIN old_rows o ON o.id = n.id"}[event]
    referencing = {"INSERT": "NEW TABLE AS new_rows", "DELETE": "OLD TABLE AS old_rows",
                   "UPDATE": "OLD TABLE AS old_rows NEW TABLE AS new_rows"}[event]
    condition = when.format(old="o", new="n")
    select = " UNION ALL ".join(f"SELECT m.family, m.instance FROM {rows} CROSS JOIN LATERAL "
                                f"({mark.format(old='o', new='n')}) AS m WHERE {condition}" for mark in marks)
    return [
        # Without JIT: the transition tables have no statistics, the planner takes a bulk update's
        # rows for millions, and compiled the mark for 1.5 s where it runs in 0.2 s.
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$ BEGIN {mark(select)}; "
        "RETURN NULL; END $$",
        f"CREATE TRIGGER {name} AFTER {event} ON {table} REFERENCING {referencing} FOR EACH STATEMENT "
        f"EXECUTE FUNCTION {name}()",
    ]


def by_row_on_sqlite(table, event, when, marks, *, name=_name, mark=_mark):
    condition = when.format(old="OLD", new="NEW").replace("IS DISTINCT FROM", "IS NOT")
    select = " UNION ALL ".join(marked.format(old="OLD", new="NEW") for marked in marks)
    return [f"CREATE TRIGGER {name(table, event)} AFTER {event} ON {table} FOR EACH ROW WHEN {condition} "
            f"BEGIN {mark(select)}; END"]


def create_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for spec in TRIGGERS:
        for statement in {"postgresql": _postgresql, "sqlite": by_row_on_sqlite}[vendor](*spec):
            schema_editor.execute(statement, params=None)
    # Counts kept from now on start from every instance with a decided reference marked: the first
    # reader counts them.
    schema_editor.execute(_mark("SELECT DISTINCT i.family_id AS family, i.id AS instance FROM annotation_instance i "
                                f"JOIN annotation_reference r ON r.instance_id = i.id WHERE r.verdict IN {DECIDED}"),
                          params=None)


def drop(schema_editor, triggers, name=_name):
    postgresql = schema_editor.connection.vendor == "postgresql"
    for table, event, _, _ in triggers:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name(table, event)}" + (f" ON {table}" if postgresql else ""))
        if postgresql:
            schema_editor.execute(f"DROP FUNCTION IF EXISTS {name(table, event)}()")


def drop_triggers(apps, schema_editor):
    drop(schema_editor, TRIGGERS)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0038_stage_config_worker_aware_stopping'),
    ]

    operations = [
        migrations.CreateModel(
            name='Table2Count',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('multi', models.BooleanField(default=False)),
                ('stale', models.BooleanField(default=False)),
                ('references', models.PositiveIntegerField(default=0)),
                ('correct', models.PositiveIntegerField(default=0)),
                ('problem_in_caption', models.PositiveIntegerField(default=0)),
                ('problem_in_response', models.PositiveIntegerField(default=0)),
                ('verified', models.PositiveIntegerField(default=0)),
                ('ended', models.PositiveIntegerField(default=0)),
                ('decided_by', models.JSONField(default=dict)),
                ('family', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE,
                                             related_name='+', to='annotation.instructionfamily')),
                ('instance', models.ForeignKey(blank=True, db_constraint=False, null=True,
                                               on_delete=django.db.models.deletion.DO_NOTHING, related_name='+',
                                               to='annotation.instance')),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('instance__isnull', True), ('stale', True),
                                                            _connector='OR'),
                                         fields=['family'], name='table2_count_sums_and_marks')],
                'constraints': [
                    models.UniqueConstraint(condition=models.Q(('instance__isnull', True)), fields=('family', 'multi'),
                                            name='table2_count_once_per_column'),
                    models.UniqueConstraint(condition=models.Q(('stale', False)), fields=('instance',),
                                            name='table2_count_once_per_instance'),
                    models.CheckConstraint(condition=models.Q(('stale', False), ('instance__isnull', False),
                                                              _connector='OR'),
                                           name='table2_count_marks_an_instance'),
                ],
            },
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
