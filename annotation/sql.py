"""SQL the ORM lacks, kept working on both databases the project runs on: PostgreSQL, and SQLite,
the embedded default `make run` starts with."""

import statistics

from django.db.models import Aggregate, FloatField, Func, IntegerField, TextField, Value
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


def update_rows(model, rows, fields, *, chunk=1000):
    """Write `fields` of `rows` (saved `model` objects) as they are in memory, in one UPDATE per
    `chunk` rows joined on the primary key to a VALUES list. Django's bulk_update writes a CASE of
    one branch per row for each field and resolves it row by row in Python: 2.5 s for 1,000
    references and their instances in the worker-model job. SQLite takes bulk_update."""
    from django.db import connection

    if connection.vendor != "postgresql":
        model.objects.bulk_update(rows, fields, batch_size=chunk)
        return
    meta = model._meta
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    quote = connection.ops.quote_name
    # The primary key's type as a column refers to it (bigint), not as it is made (bigserial).
    types = [meta.pk.rel_db_type(connection), *(field.db_type(connection) for field in columns[1:])]
    row_sql = "(" + ", ".join(f"%s::{kind}" for kind in types) + ")"
    names = ", ".join(quote(field.column) for field in columns)
    assignments = ", ".join(f"{quote(field.column)} = v.{quote(field.column)}" for field in columns[1:])
    pk = quote(meta.pk.column)
    with connection.cursor() as cursor:
        for start in range(0, len(rows), chunk):
            part = rows[start:start + chunk]
            params = [field.get_db_prep_save(getattr(row, field.attname), connection)
                      for row in part for field in columns]
            cursor.execute(f"UPDATE {quote(meta.db_table)} AS t SET {assignments} "
                           f"FROM (VALUES {', '.join([row_sql] * len(part))}) AS v({names}) WHERE t.{pk} = v.{pk}",
                           params)
