"""The checks that every count the database keeps (annotation/collection/kept_counts.py: Table 2's and
the workflow pages') is what a count from scratch gives, for the tests that change what they count in
every way they know."""

from collections import Counter

from django.db.models import Count

from annotation.collection.kept_counts import kept
from annotation.collection.table2_counts import TABLE2
from annotation.collection.workflow_counts import WORKFLOW, workflow_figures
from annotation.models import REFERENCE_MODEL_NAME, Instance, InstructionFamily, ModelResponse

EVERY_KEPT_COUNT = (TABLE2, WORKFLOW)


def _as_set(counts, rows, *keys):
    return {(*(row[key] for key in keys), *(row[key] for key in counts.keys), *(row[name] for name in counts.numbers),
             *(tuple(sorted(row[name].items())) for name in counts.tallies)) for row in rows}


def _summed(counts, parts):
    sums = {}
    for part in parts:
        key = tuple(part[name] for name in ("family_id", *counts.keys))
        row = sums.setdefault(key, {**dict(zip(("family_id", *counts.keys), key, strict=True)),
                                    **dict.fromkeys(counts.numbers, 0),
                                    **{name: Counter() for name in counts.tallies}})
        for name in counts.numbers:
            row[name] += part[name]
        for name in counts.tallies:
            row[name].update(part[name])
    return list(sums.values())


def assert_unmarked_counts_equal_a_count_from_scratch(every=EVERY_KEPT_COUNT):
    """Of each kept count: every instance no change has marked has the part a count from scratch
    gives now, every family without a mark the sums, and every family's sums are its instances'
    parts. Reads only."""
    for counts in every:
        kept_rows = counts.model.objects.values("instance_id", "stale", *counts.fields)
        marks = [row for row in kept_rows if row["stale"]]
        parts = [row for row in kept_rows if not row["stale"] and row["instance_id"] is not None]
        sums = [row for row in kept_rows if not row["stale"] and row["instance_id"] is None]
        marked_instances = {row["instance_id"] for row in marks}
        marked_families = {row["family_id"] for row in marks}
        scratch = counts.count_from_scratch(per_instance=True)
        assert (_as_set(counts, [row for row in parts if row["instance_id"] not in marked_instances], "instance_id")
                == _as_set(counts, [row for row in scratch if row["instance_id"] not in marked_instances],
                           "instance_id")), (
            f"{counts.name}: an instance's kept part differs from a count from scratch (marked: {marked_instances})")
        assert _as_set(counts, sums, "family_id") == _as_set(counts, _summed(counts, parts), "family_id"), (
            f"{counts.name}: a family's sums are not its parts'")
        unmarked_scratch = [row for row in counts.count_from_scratch() if row["family_id"] not in marked_families]
        assert (_as_set(counts, [row for row in sums if row["family_id"] not in marked_families], "family_id")
                == _as_set(counts, unmarked_scratch, "family_id")), (
            f"{counts.name}: a family's kept sums differ from a count from scratch (marked: {marked_families})")


def assert_kept_counts_equal_a_count_from_scratch(every=EVERY_KEPT_COUNT):
    """The above; and once read, every family's counts are a count from scratch, and no mark is left."""
    assert_unmarked_counts_equal_a_count_from_scratch(every)
    for counts in every:
        assert (_as_set(counts, kept(counts, InstructionFamily.objects.all()), "family_id")
                == _as_set(counts, counts.count_from_scratch(), "family_id")), counts.name
        left = list(counts.model.objects.filter(stale=True).values_list("family_id", "instance_id")[:5])
        assert not left, f"{counts.name}: marks left (family, instance): {left}"
    assert_unmarked_counts_equal_a_count_from_scratch(every)


def _workflow_figures_counted_directly(family_ids):
    """The figures as the workflow pages counted them before they were kept (issue 42): a rule of
    its own, so a fault in `workflow_counts.count_from_scratch` is not hidden by comparing it with
    itself."""
    instances = Instance.objects.filter(family_id__in=family_ids)
    responses = ModelResponse.objects.filter(instance__in=instances.filter(status=Instance.Status.VERIFIED)).exclude(
        model_name=REFERENCE_MODEL_NAME)
    return (dict(instances.values_list("status").annotate(n=Count("pk")).order_by()),
            dict(responses.values_list("model_name").annotate(n=Count("pk")).order_by()))


def assert_workflow_figures_equal_a_count_made_directly(families):
    """What the workflow pages read of `families` together is what counting their rows gives."""
    ids = [family.pk for family in families]
    figures = workflow_figures(InstructionFamily.objects.filter(pk__in=ids))
    assert (dict(figures.instances), dict(figures.responses)) == _workflow_figures_counted_directly(ids)
