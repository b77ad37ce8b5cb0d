"""What the worker-model job (annotation/collection/worker_model_job.py) reads, each in a few
queries whatever the number of references: the references waiting for a model and those a model
decided, their counted votes and units, their families' settings, the workers of known accuracy,
and every counted answer as a fit saw it."""

from collections import namedtuple

from django.db.models import Count, F, Q

from annotation.collection.verification import Asked, votes_complete
from annotation.models import (
    Aggregation,
    Instance,
    Reference,
    Snapshot,
    Stage,
    StageConfig,
    Verification,
    WorkerQualification,
    WorkUnit,
    counted_verifications,
    unreviewed_answers,
)
from annotation.sql import Among

VOTE_COLUMNS = ("reference_id", "worker_id", "is_correct", "problem_in_caption", "problem_in_response", "is_harmful")
Vote = namedtuple("Vote", VOTE_COLUMNS)


def awaiting_worker_model(*, family=None, among=None):
    """Pending references of families whose verification stage decides by a worker model, whose
    counted answers are all in and which no reviewer holds (the job decides them); of `family`, or
    `among` these ids, when given. Read in a few queries whatever their number, with the columns
    the job and the sweep read (and `family_id`)."""
    pending = (waiting_for_a_model().annotate(family_id=F("instance__family_id"))
               .only("id", "instance_id", "created_at").order_by("pk"))
    if family is not None:
        pending = pending.filter(instance__family=family)
    if among is not None:
        pending = pending.filter(pk__in=among)
    waiting = list(pending)
    configs = verification_configs({reference.family_id for reference in waiting})
    # Read through the same query, not a list of ids: tens of thousands of ids make a long statement.
    votes, units = counted_votes_of(pending.values("pk")), first_units(pending.values("pk"))
    return [reference for reference in waiting
            if votes_complete(votes.get(reference.pk, []), configs[reference.family_id], units.get(reference.pk))]


def waiting_for_a_model():
    """Pending references no reviewer holds, of instances awaiting verification in families whose
    verification stage decides by a worker model: those whose answers are all in wait for the job."""
    families = StageConfig.objects.filter(stage=Stage.VERIFICATION).exclude(aggregation=Aggregation.VOTES)
    return Reference.objects.filter(verdict=Reference.Verdict.PENDING, held_for_review="",
                                    instance__status=Instance.Status.AWAITING_VERIFICATION,
                                    instance__family__in=families.values("family_id"))


def first_units(references):
    """{reference id: what its first verification unit asks (`Asked`)} of `references` (ids, or a query)."""
    unreviewed = Count("assignments", filter=unreviewed_answers(path="assignments"))
    units = {}
    for reference_id, overlap, waiting in (
            WorkUnit.objects.filter(_among("reference_id", references), stage=Stage.VERIFICATION)
            .annotate(unreviewed=unreviewed).order_by("pk").values_list("reference_id", "overlap", "unreviewed")):
        units.setdefault(reference_id, Asked(overlap, waiting))
    return units


def verification_configs(family_ids):
    """{family id: its verification stage's settings}, made with their defaults where missing, as
    `stage_config` does."""
    found = {config.family_id: config
             for config in StageConfig.objects.filter(stage=Stage.VERIFICATION, family_id__in=family_ids)}
    for family_id in sorted(set(family_ids) - set(found)):
        found[family_id] = StageConfig.objects.get_or_create(family_id=family_id, stage=Stage.VERIFICATION)[0]
    return found


def counted_votes_of(references):
    """{reference id: its counted votes in order} of `references` (ids, or a query of them), as
    `counted_votes` reads one reference's under its family's settings (`counted_verifications` is
    that rule over every family at once). Each vote is a row of the columns deciding reads."""
    votes = {}
    for vote in map(Vote._make, Verification.objects.filter(counted_verifications(), _among("reference_id", references))
                    .order_by("pk").values_list(*VOTE_COLUMNS)):
        votes.setdefault(vote.reference_id, []).append(vote)
    return votes


def _among(column, ids):
    """`column` is one of `ids`: a list (sent as one array), or a query."""
    return Among(F(column), ids) if isinstance(ids, list) else Q(**{f"{column}__in": ids})


def revisable_by_worker_models():
    """References a worker model decided that a later fit may still revise: not adjudicated, and
    whose instance no finished snapshot has published."""
    published = set()
    for digests in Snapshot.objects.filter(status=Snapshot.Status.DONE).values_list("instance_digests", flat=True):
        published.update(int(instance_id) for instance_id in digests)
    models = [value for value in Aggregation.values if value != Aggregation.VOTES]
    return (Reference.objects.filter(decided_by__in=models, adjudicated_by__isnull=True,
                                     verdict__in=[Reference.Verdict.CORRECT, Reference.Verdict.INCORRECT])
            .exclude(instance_id__in=published).annotate(family_id=F("instance__family_id"))
            .only("id", "instance_id", "verdict", "decided_by").order_by("pk"))


def workers_of_known_accuracy():
    return frozenset(WorkerQualification.objects.filter(qualification__stage=Stage.VERIFICATION,
                                                        live_accuracy__isnull=False)
                     .values_list("worker_id", flat=True))


Seen = namedtuple("Seen", ["reference_id", "worker_id", "is_correct"])


def seen_votes(frame):
    """{reference id: its answers in a fit's frame (`worker_models.verification_frame`), in order}:
    every counted answer as the fit saw it, so that deciding and revising do not read them again;
    the few references they decide or revise are read again, locked."""
    from annotation.worker_models import CORRECT

    votes = {}
    for vote in map(Seen._make, zip(frame["task"].tolist(), frame["worker"].tolist(),
                                    (frame["label"] == CORRECT).tolist(), strict=True)):
        votes.setdefault(vote.reference_id, []).append(vote)
    return votes
