"""Which verified instances a tournament draws from: its families' (when it names none, every family
of its research group, or every family of no group for a tournament of none), of its image kind.
Battles are sampled from them and endpoint models answer them."""

from annotation.models import Tournament
from annotation.models.benchmark import benchmark_instances


def eligible_instances(tournament, *, between=None):
    """The tournament's instances in the benchmark (annotation/models/benchmark.py), in order; `between`
    (first id, last id) keeps those of one span of ids."""
    instances = benchmark_instances().select_related("family")
    if between is not None:
        instances = instances.filter(pk__range=between)
    family_ids = list(tournament.families.values_list("pk", flat=True))
    if family_ids:
        instances = instances.filter(family_id__in=family_ids)
    else:
        # "Every family" is every family its group owns: another group's instances never enter
        # its battles, its endpoint models' prompts or its snapshot's judge report.
        instances = instances.filter(family__group_id=tournament.group_id)
    instances = instances.prefetch_related("instanceimage_set").order_by("pk")
    if tournament.image_kind == Tournament.ImageKind.ALL:
        return list(instances)
    want_multi = tournament.image_kind == Tournament.ImageKind.MULTI
    return [
        i
        for i in instances
        if (i.family.is_multi_image or len(i.instanceimage_set.all()) > 1) == want_multi
    ]
