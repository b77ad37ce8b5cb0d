"""The workflow pages' counts kept by the database (annotation/collection/kept_counts.py): a family's
instances by status, and the model responses on its verified instances by model, which the family's
and the tournament's workflow pages read (a pass over 2,000 instances and 30,000 responses per
family at campaign size, issue 42). `count_from_scratch` is the one rule; the triggers of migration
0041 mark every change that reaches an instance's part.
"""

from collections import Counter
from dataclasses import dataclass, field

from django.db.models import Count

from annotation.collection import kept_counts as kept
from annotation.models import REFERENCE_MODEL_NAME, Instance, ModelResponse, WorkflowCount


def count_from_scratch(*, families=None, instance_ids=None, per_instance=False):
    """Per family (and instance, `per_instance`), as dicts of family_id, (instance_id,) instances
    ({Instance.status: instances}) and responses ({model name: responses on its verified instances}).
    The verified reference is stored as a response once battles are drawn; it is no prediction, and
    is left out. `families` (ids or a queryset) or `instance_ids` narrow it."""
    instances = Instance.objects.all()
    responses = (ModelResponse.objects.filter(instance__status=Instance.Status.VERIFIED)
                 .exclude(model_name=REFERENCE_MODEL_NAME))
    if families is not None:
        instances = instances.filter(family_id__in=families)
        responses = responses.filter(instance__family_id__in=families)
    if instance_ids is not None:
        instances = instances.filter(pk__in=instance_ids)
        responses = responses.filter(instance_id__in=instance_ids)
    by = ["family_id", *(["pk"] if per_instance else [])]
    rows = {}
    for row in instances.values(*by, "status").annotate(n=Count("pk")).order_by():
        key = (row["family_id"], row.get("pk"))
        counted = rows.setdefault(key, {"family_id": key[0], **({"instance_id": key[1]} if per_instance else {}),
                                        "instances": {}, "responses": {}})
        counted["instances"][row["status"]] = row["n"]
    responses_by = ["instance__family_id", *(["instance_id"] if per_instance else [])]
    for row in responses.values(*responses_by, "model_name").annotate(n=Count("pk")).order_by():
        rows[(row["instance__family_id"], row.get("instance_id"))]["responses"][row["model_name"]] = row["n"]
    return list(rows.values())


WORKFLOW = kept.KeptCounts(name="workflow-counts", model=WorkflowCount, keys=(), numbers=(),
                           tallies=("instances", "responses"), count_from_scratch=count_from_scratch)


@dataclass(frozen=True)
class WorkflowFigures:
    """What the workflow pages show of some families' instances and model responses."""

    instances: Counter = field(default_factory=Counter)  # Instance.status -> instances
    responses: Counter = field(default_factory=Counter)  # model name -> responses on verified instances

    @property
    def response_count(self):
        return sum(self.responses.values())

    @property
    def models(self):
        return len(self.responses)


def workflow_figures(families):
    """The workflow figures of `families` (a queryset) together, from the kept counts."""
    instances, responses = Counter(), Counter()
    for row in kept.kept(WORKFLOW, families):
        instances.update(row["instances"])
        responses.update(row["responses"])
    return WorkflowFigures(instances=instances, responses=responses)


def count_again(family_ids, *, whole_past=kept.CHUNK):
    """Count again the workflow counts' marked instances of `family_ids` (kept_counts.count_again)."""
    kept.count_again(WORKFLOW, family_ids, whole_past=whole_past)
