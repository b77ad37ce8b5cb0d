"""Table 2's counts kept by the database, so that reading Table 2 sums a few rows per family instead
of passing over every decided reference (93,000 of them with 100,000 instances, issue 42).

What is counted is `count_from_scratch`'s, over the benchmark's decided references (the rule stays
in models/benchmark.py). Its counts add up instance by instance, so each instance's part is kept
(a `Table2Count` row), and each family's sums of its instances' parts per column. Every change that
reaches an instance's part leaves a mark in its own transaction, made by database triggers
(migration 0038) whichever code changed what. So an instance without a mark has the part a count
from scratch gives, a family without one has the sums, and `kept_counts` counts the marked
instances again before reading: the work a read does grows with what changed since the last one,
not with the benchmark.
"""

import zlib
from collections import Counter, defaultdict

from django.db import connection, transaction
from django.db.models import BooleanField, Case, Count, Q, Value, When

from annotation.models import Instance, Reference, Table2Count, multi_image_q
from annotation.models.benchmark import benchmark_references
from crowdbench.scoping import every_group

COUNTED = ("references", "correct", "problem_in_caption", "problem_in_response", "verified", "ended")
# Past this many instances marked, their families are counted whole (one pass over their references
# costs less than a list of ids this long); and rows are written in lots of this many.
CHUNK = 5000
# The first number of the advisory lock that makes two counts take turns.
_LOCK_SPACE = zlib.crc32(b"table2-counts") - 2**31


def count_from_scratch(*, families=None, instance_ids=None, per_instance=False):
    """Table 2's counts per family and column (and instance, `per_instance`) from the decided
    references themselves, as dicts of family_id, multi, (instance_id,) the COUNTED numbers and
    decided_by ({Reference.decided_by: references}).

    Human-written references imported with the fully annotated example are left out: nobody rated
    them, and Table 2 is about model-written candidates. An instance has ended with a decided
    candidate when one of its references is here and verification is over for it, and is verified
    when one of them is correct. Multi-image is a property of the instance, so every reference of an
    instance falls in the same column. `families` (a queryset) or `instance_ids` narrow it.
    """
    references = benchmark_references().exclude(source=Reference.Source.IMPORTED, model="")
    if families is not None:
        references = references.filter(instance__family__in=families)
    if instance_ids is not None:
        references = references.filter(instance_id__in=instance_ids)
    ended = Q(instance__status__in=[Instance.Status.VERIFIED, Instance.Status.DISCARDED])
    known = sorted(Reference.DecidedBy.values)
    # "" (and anything not a choice) is "not recorded".
    deciders = {"decided_by_": Count("pk", filter=~Q(decided_by__in=known)),
                **{f"decided_by_{value}": Count("pk", filter=Q(decided_by=value)) for value in known}}
    # A few instances' images are looked up one by one; many instances' in one set.
    every_row = instance_ids is None or len(instance_ids) > 100
    multi = Case(When(multi_image_q("instance", every_row=every_row), then=Value(True)), default=Value(False),
                 output_field=BooleanField())
    rows = (
        references.annotate(multi=multi)
        .values("instance__family_id", "multi", *(["instance_id"] if per_instance else []))
        .annotate(
            references=Count("pk"),
            correct=Count("pk", filter=Q(verdict=Reference.Verdict.CORRECT)),
            problem_in_caption=Count("pk", filter=Q(problem_in_caption=True)),
            problem_in_response=Count("pk", filter=Q(problem_in_response=True)),
            verified=Count("instance", distinct=True, filter=ended & Q(verdict=Reference.Verdict.CORRECT)),
            ended=Count("instance", distinct=True, filter=ended),
            **deciders,
        )
        .order_by()
    )
    counted = []
    for row in rows:
        decided_by = {value: row.pop(f"decided_by_{value}") for value in ["", *known]}
        counted.append({"family_id": row.pop("instance__family_id"), **row,
                        "decided_by": {value: n for value, n in decided_by.items() if n}})
    return counted


def _sums(families):
    return Table2Count.objects.filter(family__in=families).filter(Q(instance__isnull=True) | Q(stale=True))


def kept_counts(families, *, keep=True):
    """Table 2's counts of `families` (a queryset) per family and column, as `count_from_scratch`
    gives them: the kept sums in one query, after the instances a change has marked since are
    counted again. `keep=False` (a read-only transaction, such as a snapshot's build) counts the
    families with a mark from scratch instead, and keeps nothing."""
    fields = ("family_id", "multi", *COUNTED, "decided_by")
    rows = list(_sums(families).values(*fields, "stale"))
    marked = sorted({row["family_id"] for row in rows if row["stale"]})
    if marked and not keep:
        return ([{name: row[name] for name in fields} for row in rows if row["family_id"] not in marked]
                + count_from_scratch(families=marked))
    if marked:
        count_again(marked)
        rows = list(_sums(families).values(*fields, "stale"))
    return [{name: row[name] for name in fields} for row in rows if not row["stale"]]


def count_again(family_ids, *, whole_past=CHUNK):
    """Count again the instances marked in the families of `family_ids` and keep their parts and
    their families' sums, taking the marks away; past `whole_past` instances marked, the families
    are counted whole. A change committed meanwhile keeps its mark. Each statement must see what
    was committed before it (PostgreSQL's READ COMMITTED, its default), after the lock."""
    # The kept rows are every group's: the sums they feed are read only in the reader's scope.
    with every_group("Table 2's kept counts are counted again for whichever family changed"), transaction.atomic():
        if connection.vendor == "postgresql":
            # Two counts at once would each add their own difference to a family's sums.
            # SQLite writes one transaction at a time already.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, 0)", [_LOCK_SPACE])
        marks = list(Table2Count.objects.filter(stale=True, family_id__in=family_ids).values_list("pk", "instance_id"))
        instance_ids = sorted({instance_id for _, instance_id in marks})
        parts = Table2Count.objects.filter(stale=False, instance__isnull=False)
        if len(instance_ids) <= whole_past:
            _replace(parts.filter(instance_id__in=instance_ids),
                     count_from_scratch(instance_ids=instance_ids, per_instance=True), [pk for pk, _ in marks])
        else:
            # Most of the families changed (the first count after migration 0038, an import): they
            # are counted whole, with the parts of every instance they hold or held.
            _replace(parts.filter(Q(family_id__in=family_ids) | Q(instance__family_id__in=family_ids)),
                     count_from_scratch(families=family_ids, per_instance=True), [pk for pk, _ in marks])


def _replace(old_parts, new_parts, mark_pks):
    """Put `new_parts` in place of `old_parts` and of the marks, and the difference into the sums."""
    old = list(old_parts.values("pk", "family_id", "multi", *COUNTED, "decided_by"))
    change = defaultdict(lambda: (Counter(), Counter()))
    for rows, sign in ((old, -1), (new_parts, 1)):
        for row in rows:
            counts, decided_by = change[row["family_id"], row["multi"]]
            counts.update({name: sign * row[name] for name in COUNTED})
            decided_by.update({value: sign * n for value, n in row["decided_by"].items()})
    of_families = Table2Count.objects.filter(instance__isnull=True, family_id__in={family for family, _ in change})
    sums = [row for row in of_families.values("pk", "family_id", "multi", *COUNTED, "decided_by")
            if (row["family_id"], row["multi"]) in change]
    kept = {(row["family_id"], row["multi"]): row for row in sums}
    summed = []
    for (family_id, multi), (counts, decided_by) in change.items():
        row = kept.get((family_id, multi), {})
        counts.update({name: row.get(name, 0) for name in COUNTED})
        decided_by.update(row.get("decided_by", {}))
        if counts["references"]:
            summed.append(Table2Count(family_id=family_id, multi=multi, **{name: counts[name] for name in COUNTED},
                                      decided_by={value: n for value, n in sorted(decided_by.items()) if n}))
    gone = [row["pk"] for row in old + sums] + mark_pks
    for start in range(0, len(gone), CHUNK):
        Table2Count.objects.filter(pk__in=gone[start:start + CHUNK]).delete()
    Table2Count.objects.bulk_create([Table2Count(**row) for row in new_parts] + summed, batch_size=CHUNK)
