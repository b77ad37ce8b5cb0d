"""What the benchmark contains (DESIGN: "in the benchmark"): the one definition that the snapshots
(every sheet, Parquet and the Hugging Face configs), the family sheets and the API read, so none
decides it for itself. It lives with the models because what counts in the ratings
(`counted_battles`) reads it too.

Only counted work enters (`counted_work`: accepted answers, provisional ones where their stage
counts them, and the researchers' and imports'); a rejected answer, and whatever rests on it, is
out. An instance is in the benchmark when it is verified, holds a verified reference, and rests on
no rejected caption; an instance discarded by our verifiers, or a published row its authors rated
incorrect without giving a reference (imported as discarded), is not.
"""

from django.db.models import Exists, OuterRef, Q

from annotation.models.collection import Caption, Reference
from annotation.models.instances import Instance
from annotation.models.work import WorkState


def _rests_on_rejected_caption():
    # A join: asked for each of a family's instances, PostgreSQL follows it row by row through
    # the indexes. The instances' own current caption is tested against `_rejected_captions`.
    return Q(caption__assignment__work_state=WorkState.REJECTED)


def _rejected_captions():
    # Asked as "not in" this list, PostgreSQL keeps it as a hash of the few rejected answers'
    # captions (from the index on work_state); as a join it hashed every caption of the campaign
    # to answer for one family.
    return Caption.objects.filter(assignment__work_state=WorkState.REJECTED).values("pk")


def benchmark_references():
    """References verification decided (correct or incorrect) on work that counts: not pending, not
    withdrawn, not written from a rejected caption. Table 2 rates these; the verified one among an
    instance's is its reference in the sheets."""
    return (Reference.objects.filter(verdict__in=[Reference.Verdict.CORRECT, Reference.Verdict.INCORRECT])
            .exclude(_rests_on_rejected_caption()))


def benchmark_instances(*, group=None):
    """The instances in the benchmark (of the families `group` owns, when given), by id: verified,
    with a non-empty verified reference and a decided reference, resting on no rejected caption, and
    none of whose references was flagged harmful."""
    instances = Instance.objects.all() if group is None else Instance.objects.filter(family__group=group)
    decided = benchmark_references().filter(instance=OuterRef("pk"))
    return (
        instances.filter(Exists(decided), status=Instance.Status.VERIFIED)
        .exclude(reference_output__regex=r"^\s*$")
        .exclude(current_caption__in=_rejected_captions())
        .exclude(Exists(Reference.objects.filter(instance=OuterRef("pk"), flagged_harmful=True)))
        .order_by("id")
    )
