"""SQL the ORM lacks, kept working on both databases the project runs on: PostgreSQL, and SQLite,
the embedded default `make run` starts with."""

import datetime
import json
import statistics

from django.db.models import Aggregate, FloatField, Func, IntegerField, Lookup, TextField, Value
from django.db.models.functions import Cast, Lower, Trim


class Median(Aggregate):
    """The exact median (PostgreSQL's ordered-set aggregate; on SQLite the MEDIAN aggregate that
    `register_sqlite_median` adds to each connection). NULLs are left out, as by AVG."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, function="MEDIAN", template="%(function)s(%(expressions)s)",
                           **extra)


class _SQLiteMedian:
    def __init__(self):
        self.values = []

    def step(self, value):
        if value is not None:
            self.values.append(value)

    def finalize(self):
        return statistics.median(self.values) if self.values else None


def register_sqlite_median(sender, connection, **kwargs):
    """A `connection_created` receiver (annotation/apps.py)."""
    if connection.vendor == "sqlite":
        connection.connection.create_aggregate("MEDIAN", 1, _SQLiteMedian)


class _WithoutSpace(Func):
    """The text without whitespace, nor the escaped newlines and tabs of JSON text. SQLite has no
    regular expressions: there only case and the ends are normalised."""

    function = "REGEXP_REPLACE"
    output_field = TextField()

    def __init__(self, expression):
        super().__init__(expression, Value(r"(\s|\\[nrt])+"), Value(""), Value("g"))

    def as_sqlite(self, compiler, connection, **extra):
        return compiler.compile(self.source_expressions[0])


class KeysPresent(Func):
    """How many of `keys` a JSON object field holds, counted in the database: the object may be
    megabytes (a snapshot's digest of every instance), which the page would otherwise fetch and
    parse to count a few thousand keys."""

    output_field = IntegerField()

    def __init__(self, field, keys):
        super().__init__(field)
        self.keys = [str(key) for key in keys]

    def as_postgresql(self, compiler, connection, **extra):
        field, params = compiler.compile(self.source_expressions[0])
        # The object's keys read once and joined: a look-up of each key in it (the ? operator)
        # unpacked the stored object again on every look-up, 4 s for 2,000 keys of a 7 MB object.
        return (f"(SELECT COUNT(*) FROM jsonb_object_keys({field}) AS held(key) "
                f"JOIN unnest(%s::text[]) AS wanted(key) ON wanted.key = held.key)", [*params, self.keys])

    def as_sqlite(self, compiler, connection, **extra):
        field, params = compiler.compile(self.source_expressions[0])
        if not self.keys:
            return "0", []
        marks = ", ".join(["%s"] * len(self.keys))
        return f"(SELECT COUNT(*) FROM json_each({field}) WHERE json_each.key IN ({marks}))", [*params, *self.keys]


def normalised_text(field):
    """A text (or a JSON list of texts) as two answers must share to be the same answer: in lower
    case and without spacing (a copy with a space added or dropped is still a copy). For grouping,
    not for showing."""
    return Lower(Trim(_WithoutSpace(Cast(field, TextField()))))


def count_up_to(queryset, limit):
    """How many rows `queryset` has, counted no further than `limit` and one more: a count that
    stays cheap on a table of millions, and says (by exceeding `limit`) that there are more."""
    return queryset.order_by().values("pk")[:limit + 1].count()


class Among(Lookup):
    """`Among(F("pk"), ids)`: the column is one of `ids`, passed as one array (PostgreSQL's
    `= ANY`; SQLite reads a JSON list). `pk__in=ids` sends one placeholder per id, which Django
    prepares one by one and psycopg parses out of the statement again: seconds for the worker-model
    job's hundreds of thousands of ids."""

    lookup_name = "among"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        lhs, params = self.process_lhs(compiler, connection)
        kind = self.lhs.output_field.rel_db_type(connection)
        return f"{lhs} = ANY(%s::{kind}[])", [*params, [int(value) for value in self.rhs]]

    def as_sqlite(self, compiler, connection):
        lhs, params = self.process_lhs(compiler, connection)
        return f"{lhs} IN (SELECT value FROM json_each(%s))", [*params, json.dumps([int(value) for value in self.rhs])]


def update_rows(model, rows, fields):
    """Write `fields` of `rows` as they are in memory, in one UPDATE joined on the primary key to
    the rows passed as one JSON document (`json_populate_recordset` reads it as rows of the table).
    A row is a saved `model` object, or any object carrying the model's primary key and `fields`
    under their attribute names (a job that decides tens of thousands of rows need not make a model
    object of each). Django's bulk_update writes a CASE of one branch per row for each field and
    resolves it row by row in Python (2.5 s for 1,000 references and their instances in the
    worker-model job); one placeholder per value had psycopg parse a statement of 16,000 of them,
    and one array per column had it quote every text of every array in Python. On SQLite,
    bulk_update."""
    from django.db import connection

    if not rows:
        return
    meta = model._meta
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    if connection.vendor != "postgresql":
        model.objects.bulk_update([model(**{field.attname: getattr(row, field.attname) for field in columns})
                                   for row in rows], fields, batch_size=1000)
        return
    quote = connection.ops.quote_name
    table, pk = quote(meta.db_table), quote(meta.pk.column)
    assignments = ", ".join(f"{quote(field.column)} = v.{quote(field.column)}" for field in columns[1:])
    document = json.dumps([{field.column: getattr(row, field.attname) for field in columns} for row in rows],
                          default=_json_value)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} AS t SET {assignments} "
                       f"FROM json_populate_recordset(NULL::{table}, %s) AS v WHERE t.{pk} = v.{pk}", [document])


def _json_value(value):
    # Whole microseconds, which DjangoJSONEncoder would cut to milliseconds.
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    raise TypeError(f"update_rows cannot write {type(value).__name__} as JSON.")
