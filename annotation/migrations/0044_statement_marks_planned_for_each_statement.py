"""The kept counts' statement triggers (migrations 0039, 0041 and 0042) plan their mark each time
they run, for the rows that statement changed.

PL/pgSQL plans a statement of a function once per connection and keeps that plan, and a statement
with no parameters keeps its first plan. The first plan was made for the transition tables of the
connection's first such statement, usually a few rows (one submit decides one reference), where a
nested loop over the old and the new rows is right. The worker-model job then decided ten thousand
references with that plan, comparing each old row with each new one: 100 million comparisons, about
13 s for each batch of its decisions instead of about 0.1 s (benchmarks/worker_model_job.py). A
statement run with EXECUTE is planned when it runs, from the transition tables' row counts then.

SQLite has no statement triggers; nothing changes there.
"""

from importlib import import_module

from django.db import migrations

table2 = import_module("annotation.migrations.0039_table2_counts_kept_by_the_database")
workflow = import_module("annotation.migrations.0041_workflow_counts_kept_by_the_database")

STATIC_BODY = "AS $$ BEGIN "
STATIC_END = "; RETURN NULL; END $$"


def _statement_functions():
    """The CREATE FUNCTION of every statement trigger the kept counts have, as those migrations wrote it."""
    table2_specs = [spec for spec in table2.TRIGGERS
                    if spec[0] in table2.BY_STATEMENT or spec[:2] == ("annotation_instance", "UPDATE")]
    made = [table2.by_statement(*spec) for spec in table2_specs]
    made += [workflow._postgresql(*spec) for spec in workflow.TRIGGERS]
    return [statements[0] for statements in made]


def _planned_each_time(create_function):
    head, body = create_function.split(STATIC_BODY, 1)
    assert body.endswith(STATIC_END) and "$mark$" not in body, create_function
    mark = body[: -len(STATIC_END)]
    return f"{head.replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION', 1)}AS $$ BEGIN EXECUTE $mark${mark}$mark$" \
        f"{STATIC_END}"


def _replace(schema_editor, functions):
    if schema_editor.connection.vendor != "postgresql":
        return
    for function in functions:
        schema_editor.execute(function, params=None)


def planned_each_time(apps, schema_editor):
    _replace(schema_editor, [_planned_each_time(function) for function in _statement_functions()])


def planned_once(apps, schema_editor):
    _replace(schema_editor, [function.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
                             for function in _statement_functions()])


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0043_reference_flagged_harmful_index'),
    ]

    operations = [
        migrations.RunPython(planned_each_time, planned_once),
    ]
