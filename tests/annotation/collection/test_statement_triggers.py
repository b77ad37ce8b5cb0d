"""Every trigger that reads a statement's transition tables plans its work when it runs (migration
0044). PL/pgSQL keeps the first plan of a static statement for the connection's life, made for the
first statement's few rows; the worker-model job's ten thousand rows then went through a nested
loop of old rows against new ones (13 s a batch, benchmarks/worker_model_job.py). The test lists
the triggers from the database itself, so a trigger added later is held to it the day it is added."""

import pytest
from django.db import connection

from annotation.models import Reference, Table2Count
from tests.kept_counts_support import assert_kept_counts_equal_a_count_from_scratch
from tests.scoring_factories import verified_instance

pytestmark = pytest.mark.django_db


def statement_triggers():
    with connection.cursor() as cursor:
        cursor.execute("SELECT t.tgrelid::regclass::text, t.tgname, p.prosrc FROM pg_trigger t "
                       "JOIN pg_proc p ON p.oid = t.tgfoid "
                       "WHERE NOT t.tgisinternal AND (t.tgoldtable IS NOT NULL OR t.tgnewtable IS NOT NULL) "
                       "ORDER BY 1, 2")
        return cursor.fetchall()


def test_every_trigger_over_transition_tables_plans_its_statement_when_it_runs():
    if connection.vendor != "postgresql":
        pytest.skip("transition tables are PostgreSQL's")
    found = statement_triggers()
    # The kept counts' marks: Table 2's on references and instances, the workflow pages' on
    # instances and model responses.
    assert len(found) >= 10, found
    planned_once = [(table, name) for table, name, source in found
                    if not source.strip().upper().startswith("BEGIN EXECUTE ")]
    assert planned_once == []


def test_a_large_statement_after_a_small_one_on_the_same_connection_marks_every_row_it_changed():
    # The connection's first mark sees one row, the next many: each marks what its own statement changed.
    references = [verified_instance().references.get() for _ in range(30)]
    assert_kept_counts_equal_a_count_from_scratch()  # read: no mark left
    Reference.objects.filter(pk=references[0].pk).update(problem_in_caption=True)
    Reference.objects.filter(pk__in=[reference.pk for reference in references[1:]]).update(problem_in_caption=True)
    marked = set(Table2Count.objects.filter(stale=True).values_list("instance_id", flat=True))
    assert marked == {reference.instance_id for reference in references}
    assert_kept_counts_equal_a_count_from_scratch()
