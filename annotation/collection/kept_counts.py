"""Counts kept by the database per family, so that a page sums a few rows instead of passing over
every row they count (issue 42): Table 2's (table2_counts.py) and the workflow pages'
(workflow_counts.py) are two `KeptCounts` of this one mechanism.

A kept count adds up instance by instance, so each instance's part is kept (a row naming the
instance), and each family's sums of its instances' parts (a row naming none, per the kept count's
`keys`). Every change that reaches an instance's part leaves a mark (a row with `stale`) in its own
transaction, made by database triggers (migrations 0039 and 0041) whichever code changed what. So an
instance without a mark has the part a count from scratch gives, a family without one has the
sums, and `kept` counts the marked instances again before reading: the work a read does grows with
what changed since the last one, not with the families.
"""

import zlib
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Q

from annotation.models import Instance
from crowdbench.scoping import every_group

# Past this many instances marked, their families are counted whole (one pass over their rows
# costs less than a list of ids this long); and rows are written in lots of this many.
CHUNK = 5000


@dataclass(frozen=True)
class KeptCounts:
    """One kept count: its rows' model, what it is kept per beside the family (`keys`), its numbers
    and its tallies ({value: n}, summed value by value), and its one rule, `count_from_scratch(*,
    families=None, instance_ids=None, per_instance=False)`, giving rows of family_id, the keys,
    (instance_id,) the numbers and the tallies."""

    name: str
    model: type
    keys: tuple
    numbers: tuple
    tallies: tuple
    count_from_scratch: Callable

    @property
    def fields(self):
        return ("family_id", *self.keys, *self.numbers, *self.tallies)

    @property
    def lock(self):
        """The first number of the advisory lock that makes two counts of it take turns."""
        return zlib.crc32(self.name.encode()) - 2**31

    def is_empty(self, row):
        return not any(row[name] for name in (*self.numbers, *self.tallies))


def _sums_and_marks(counts, families):
    return counts.model.objects.filter(family__in=families).filter(Q(instance__isnull=True) | Q(stale=True))


def kept(counts, families, *, keep=True):
    """`counts` of `families` (a queryset) per family and keys, as its `count_from_scratch` gives
    them: the kept sums in one query, after the instances a change has marked since are counted
    again. `keep=False` (a read-only transaction, such as a snapshot's build) counts the families
    with a mark from scratch instead, and keeps nothing."""
    rows = list(_sums_and_marks(counts, families).values(*counts.fields, "stale"))
    marked = sorted({row["family_id"] for row in rows if row["stale"]})
    if marked and not keep:
        return ([{name: row[name] for name in counts.fields} for row in rows if row["family_id"] not in marked]
                + counts.count_from_scratch(families=marked))
    if marked:
        count_again(counts, marked)
        rows = list(_sums_and_marks(counts, families).values(*counts.fields, "stale"))
    return [{name: row[name] for name in counts.fields} for row in rows if not row["stale"]]


def count_again(counts, family_ids, *, whole_past=CHUNK):
    """Count again the instances marked in the families of `family_ids` and keep their parts and
    their families' sums, taking the marks away; past `whole_past` instances marked, the families
    are counted whole. A change committed meanwhile keeps its mark. Each statement must see what
    was committed before it (PostgreSQL's READ COMMITTED, its default), after the lock."""
    model = counts.model
    # The kept rows are every group's: the sums they feed are read only in the reader's scope.
    reason = f"the kept counts {counts.name} are counted again for whichever family changed"
    with every_group(reason), transaction.atomic():
        if connection.vendor == "postgresql":
            # Two counts at once would each add their own difference to a family's sums.
            # SQLite writes one transaction at a time already.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, 0)", [counts.lock])
        marks = list(model.objects.filter(stale=True, family_id__in=family_ids).values_list("pk", "instance_id"))
        instance_ids = sorted({instance_id for _, instance_id in marks})
        parts = model.objects.filter(stale=False, instance__isnull=False)
        if len(instance_ids) <= whole_past:
            _replace(counts, parts.filter(instance_id__in=instance_ids),
                     counts.count_from_scratch(instance_ids=instance_ids, per_instance=True), [pk for pk, _ in marks])
        else:
            # Most of the families changed (the first count after a migration that marks every
            # instance, an import): they are counted whole, with the parts of every instance they
            # hold or held. Those held are found by the instances' ids, not a join: the join is an
            # inner one, and would miss the part of an instance deleted since.
            held = Instance.objects.filter(family_id__in=family_ids).values("pk")
            _replace(counts, parts.filter(Q(family_id__in=family_ids) | Q(instance_id__in=held)),
                     counts.count_from_scratch(families=family_ids, per_instance=True), [pk for pk, _ in marks])


def _replace(counts, old_parts, new_parts, mark_pks):
    """Put `new_parts` in place of `old_parts` and of the marks, and the difference into the sums."""
    model = counts.model
    old = list(old_parts.values("pk", *counts.fields))
    change = defaultdict(lambda: (Counter(), {name: Counter() for name in counts.tallies}))
    for rows, sign in ((old, -1), (new_parts, 1)):
        for row in rows:
            numbers, tallies = change[tuple(row[name] for name in ("family_id", *counts.keys))]
            numbers.update({name: sign * row[name] for name in counts.numbers})
            for name in counts.tallies:
                tallies[name].update({value: sign * n for value, n in row[name].items()})
    of_families = model.objects.filter(instance__isnull=True, family_id__in={key[0] for key in change})
    sums = [row for row in of_families.values("pk", *counts.fields)
            if tuple(row[name] for name in ("family_id", *counts.keys)) in change]
    kept_sums = {tuple(row[name] for name in ("family_id", *counts.keys)): row for row in sums}
    summed = []
    for key, (numbers, tallies) in change.items():
        row = kept_sums.get(key, {})
        numbers.update({name: row.get(name, 0) for name in counts.numbers})
        for name in counts.tallies:
            tallies[name].update(row.get(name, {}))
        new = {**dict(zip(("family_id", *counts.keys), key, strict=True)),
               **{name: numbers[name] for name in counts.numbers},
               **{name: {value: n for value, n in sorted(tallies[name].items()) if n} for name in counts.tallies}}
        if not counts.is_empty(new):
            summed.append(model(**new))
    gone = [row["pk"] for row in old + sums] + mark_pks
    for start in range(0, len(gone), CHUNK):
        model.objects.filter(pk__in=gone[start:start + CHUNK]).delete()
    model.objects.bulk_create([model(**row) for row in new_parts] + summed, batch_size=CHUNK)
