"""The audit trail of what researchers do (django-auditlog): who launched, changed, reviewed,
rejected, published or deleted what, and when, shown per object in the admin.

Payments and every other platform call keep their own log (mturk/services/audit.py), which also
holds what the platform answered. Models that annotators create at every step (assignments,
workers, captions, judgements) are not registered: a log row per arrival or per answer would add a
write to the hot path and drown the researchers' actions. What researchers decide about those rows
(a review) is written here by the service that decides it, with the reviewer as the actor."""

from auditlog.models import LogEntry
from auditlog.registry import auditlog
from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.db.models import Q

from annotation import teams


def register_researcher_models():
    """Called once by the app's ready(): the rows researchers make and change in the admin."""
    from annotation.models import (
        ImageAsset,
        InstructionFamily,
        JudgeRun,
        Membership,
        ModelEndpoint,
        Reference,
        ResearchGroup,
        Rubric,
        SeedImage,
        Snapshot,
        StageConfig,
        StageQualification,
        Tournament,
        WorkerBlock,
        WorkerQualification,
    )

    for model in (InstructionFamily, SeedImage, ImageAsset, StageConfig, Tournament, Rubric, ModelEndpoint,
                  JudgeRun, Snapshot, StageQualification, WorkerBlock, ResearchGroup, Membership):
        register(model)
    # A reference's text and verdict are what researchers edit or adjudicate; its counters move
    # with every verification and would bury them.
    auditlog.register(Reference, include_fields=["text", "verdict"])
    # A pause and a resumption, whether a researcher or the gold checks made them.
    auditlog.register(WorkerQualification, include_fields=["status", "paused_at"])


def register(model, *, exclude=()):
    """Track a model's own fields (but `exclude`) and many-to-many choices (a tournament's families):
    left to itself django-auditlog also lists every reverse relation ("Instances: annotation.Instance.None")."""
    own = [field.name for field in model._meta.concrete_fields if field.name not in exclude]
    many = [field.name for field in model._meta.many_to_many]
    auditlog.register(model, include_fields=own, m2m_fields=many)


def record_review(*, assignment, before, reviewer, reason):
    """One entry per answer whose work state a review changed, on the answer's assignment."""
    changes = {"work_state": [before, assignment.work_state]}
    if reason:
        changes["review_reason"] = ["", reason]
    LogEntry.objects.log_create(assignment, action=LogEntry.Action.UPDATE, changes=changes, actor=reviewer)


# Rows whose trail their group's owners read besides those of annotation/teams.py's GROUP_PATHS:
# the group itself and its memberships, which owners manage.
_GROUP_ROWS = {"annotation.researchgroup": "pk", "annotation.membership": "group"}


def _trail_paths():
    """{model: the lookup to its owning group} for every model entries are written about: those
    registered here, and the answers a review logs (`record_review`)."""
    logged = {*auditlog.get_models(), apps.get_model("annotation", "Assignment")}
    paths = {}
    for model in logged:
        path = _GROUP_ROWS.get(model._meta.label_lower) or teams.group_path(model)
        if path is not None:
            paths[model] = path
    return paths


def visible_entries(entries, user):
    """The audit entries `user` reads in the admin's audit trail: a superuser every one; an owner of
    a research group those about that group's rows (its families, tournaments, snapshots and what
    hangs from them, its reviews of answers, the group and its members), never another group's.
    Staff outside groups given the permission read those about rows of no group. Entries about rows
    no group owns (images, qualification tests, worker blocks) and about deleted rows, whose group
    can no longer be read, stay the superusers'."""
    if user is not None and user.is_superuser:
        return entries
    about = Q(pk__in=[])
    for model, path in _trail_paths().items():
        owned = teams.changeable(model.objects.all(), user, via=path, roles={teams.Role.OWNER})
        about |= Q(content_type=ContentType.objects.get_for_model(model), object_id__in=owned.values("pk"))
    return entries.filter(about)
