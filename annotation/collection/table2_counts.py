"""Table 2's counts kept by the database (annotation/collection/kept_counts.py), so that reading
Table 2 sums a few rows per family instead of passing over every decided reference (93,000 of them
with 100,000 instances, issue 42).

What is counted is `count_from_scratch`'s, over the benchmark's decided references (the rule stays
in models/benchmark.py). Its counts add up instance by instance, so each instance's part is kept
(a `Table2Count` row), and each family's sums of its instances' parts per column; the triggers of
migration 0039 mark every change that reaches an instance's part.
"""

from django.db.models import BooleanField, Case, Count, Q, Value, When

from annotation.collection import kept_counts as kept
from annotation.collection.kept_counts import CHUNK, KeptCounts
from annotation.models import Instance, Reference, Table2Count, multi_image_q
from annotation.models.benchmark import benchmark_references

COUNTED = ("references", "correct", "problem_in_caption", "problem_in_response", "verified", "ended")
__all__ = ["CHUNK", "COUNTED", "count_again", "count_from_scratch", "kept_counts"]


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


TABLE2 = KeptCounts(name="table2-counts", model=Table2Count, keys=("multi",), numbers=COUNTED,
                    tallies=("decided_by",), count_from_scratch=count_from_scratch)


def kept_counts(families, *, keep=True):
    """Table 2's counts of `families` (a queryset) per family and column, as `count_from_scratch`
    gives them (kept_counts.kept)."""
    return kept.kept(TABLE2, families, keep=keep)


def count_again(family_ids, *, whole_past=CHUNK):
    """Count again the instances of Table 2 marked in the families of `family_ids` (kept_counts.count_again)."""
    kept.count_again(TABLE2, family_ids, whole_past=whole_past)
