"""The checks that Table 2's kept counts (annotation/collection/table2_counts.py) are what a count
from scratch gives, for the tests that change what Table 2 counts in every way they know."""

from collections import Counter

from annotation.collection.table2_counts import COUNTED, count_from_scratch, kept_counts
from annotation.models import InstructionFamily, Table2Count


def _as_set(rows, *keys):
    return {(*(row[key] for key in keys), row["multi"], *(row[name] for name in COUNTED),
             tuple(sorted(row["decided_by"].items()))) for row in rows}


def _summed(parts):
    sums = {}
    for part in parts:
        row = sums.setdefault((part["family_id"], part["multi"]), {
            "family_id": part["family_id"], "multi": part["multi"], **dict.fromkeys(COUNTED, 0),
            "decided_by": Counter()})
        for name in COUNTED:
            row[name] += part[name]
        row["decided_by"].update(part["decided_by"])
    return list(sums.values())


def assert_unmarked_counts_equal_a_count_from_scratch():
    """Every instance no change has marked has the part a count from scratch gives now, every family
    without a mark the sums, and every family's sums are its instances' parts. Reads only."""
    kept = Table2Count.objects.values("family_id", "instance_id", "stale", "multi", *COUNTED, "decided_by")
    marks = [row for row in kept if row["stale"]]
    parts = [row for row in kept if not row["stale"] and row["instance_id"] is not None]
    sums = [row for row in kept if not row["stale"] and row["instance_id"] is None]
    marked_instances = {row["instance_id"] for row in marks}
    marked_families = {row["family_id"] for row in marks}
    scratch = count_from_scratch(per_instance=True)
    assert (_as_set([row for row in parts if row["instance_id"] not in marked_instances], "instance_id")
            == _as_set([row for row in scratch if row["instance_id"] not in marked_instances], "instance_id")), (
        f"an instance's kept part differs from a count from scratch (marked: {marked_instances})")
    assert _as_set(sums, "family_id") == _as_set(_summed(parts), "family_id"), "a family's sums are not its parts'"
    unmarked_scratch = [row for row in count_from_scratch() if row["family_id"] not in marked_families]
    assert (_as_set([row for row in sums if row["family_id"] not in marked_families], "family_id")
            == _as_set(unmarked_scratch, "family_id")), (
        f"a family's kept sums differ from a count from scratch (marked: {marked_families})")


def assert_kept_counts_equal_a_count_from_scratch():
    """The above; and once read, every family's counts are a count from scratch, and no mark is left."""
    assert_unmarked_counts_equal_a_count_from_scratch()
    assert _as_set(kept_counts(InstructionFamily.objects.all()), "family_id") == _as_set(count_from_scratch(),
                                                                                          "family_id")
    left = list(Table2Count.objects.filter(stale=True).values_list("family_id", "instance_id")[:5])
    assert not left, f"marks left (family, instance): {left}"
    assert_unmarked_counts_equal_a_count_from_scratch()
