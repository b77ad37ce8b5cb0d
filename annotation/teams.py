"""Who may see and change what: research groups own families, tournaments and snapshots, and every
row hanging from them (a family's instances, answers and studies; a tournament's battles and judge
runs). The admin, the dashboard, the API and snapshot downloads all ask here.

- A superuser sees and changes everything.
- A member of one or more groups sees what those groups own; owners and researchers change it,
  reviewers review its answers, viewers only look.
- A staff account in no group works as before groups existed: it sees what no group owns, as its
  Django model permissions allow. Rows made before groups stay there until an owner claims them.
"""

from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Q

from annotation.exceptions import AnnotationError
from annotation.models import Membership, ResearchGroup

Role = Membership.Role
CHANGERS = frozenset({Role.OWNER, Role.RESEARCHER})
REVIEWERS = CHANGERS | {Role.REVIEWER}


def _roles(user):
    """{group id: role} of `user`, read once per request."""
    if user is None or not user.is_authenticated:
        return {}
    cached = getattr(user, "_research_roles", None)
    if cached is None:
        cached = dict(Membership.objects.filter(user=user).values_list("group_id", "role"))
        user._research_roles = cached
    return cached


def is_member(user):
    return bool(_roles(user))


def _paths(via):
    return (via,) if isinstance(via, str) else tuple(via)


def visible(queryset, user, *, via="group"):
    """`queryset` narrowed to the rows `user` may see; `via` is the lookup from its model to the
    owning group ("family__group" for an instance), or several for a row that may hang from any
    one of them (a webhook endpoint about a family, a tournament or a study). Every role sees."""
    return changeable(queryset, user, via=via, roles=frozenset(Role.values))


def changeable(queryset, user, *, via="group", roles=CHANGERS):
    """`queryset` narrowed to the rows `user` may change with one of `roles`."""
    condition = _condition(queryset.model, user, via=via, roles=roles)
    return queryset if condition is None else queryset.filter(condition)


def _condition(model, user, *, via, roles):
    """The condition on `model`'s rows that `user` holds with one of `roles`; None for every row."""
    if user is not None and user.is_superuser:
        return None
    held = _roles(user)
    groups = [group for group, role in held.items() if role in roles] if held else None
    paths = _paths(via)
    owned = Q()
    for path in paths:
        if groups is None:
            owned &= _owned_by(model, path, None)
        else:
            owned |= _owned_by(model, path, groups)
    return owned


def _owned_by(model, path, groups):
    """The condition that a row of `model` reaches one of `groups` (None: no group) by `path`,
    hop by hop as `IN (SELECT ...)` rather than as joins: a row locked with select_for_update
    locks that row alone, never the family or unit it was narrowed through (the lock order,
    annotation/crowdwork/lock_order.py, names what is locked and in which order)."""
    hop, _, rest = path.partition("__")
    if not rest:
        return Q(**{f"{hop}__isnull": True}) if groups is None else Q(**{f"{hop}__in": groups})
    parent = model._meta.get_field(hop).related_model
    parents = parent._base_manager.filter(_owned_by(parent, rest, groups)).values("pk")
    if groups is None:
        # Of no group: hanging from no row at all (a webhook endpoint about no tournament), or
        # from a row of no group.
        return Q(**{f"{hop}__isnull": True}) | Q(**{f"{hop}__in": parents})
    return Q(**{f"{hop}__in": parents})


# The lookup from each model a group owns, directly or through its family, tournament, snapshot or
# study, to the owning group: the one map every door reads a model's scope from (`scoped`), so a
# choice list, a filter or a page of a new kind of row is narrowed without a lookup of its own.
# Rows hanging from one of several owners (a webhook endpoint) name each.
ENDPOINT_GROUPS = ("family__group", "tournament__group", "study__family__group")
GROUP_PATHS = {
    "annotation.instructionfamily": "group",
    "annotation.tournament": "group",
    "annotation.snapshot": "group",
    "annotation.stageconfig": "family__group",
    "annotation.seedimage": "family__group",
    "annotation.instance": "family__group",
    "annotation.instanceimage": "instance__family__group",
    "annotation.importedrow": "instance__family__group",
    "annotation.workunit": "family__group",
    "annotation.workerreliability": "family__group",
    "annotation.labelshare": "family__group",
    "annotation.assignment": "unit__family__group",
    "annotation.answer": "unit__family__group",
    "annotation.caption": "instance__family__group",
    "annotation.instructionsubmission": "instance__family__group",
    "annotation.reference": "instance__family__group",
    "annotation.table2count": "family__group",
    "annotation.workflowcount": "family__group",
    "annotation.decisionchange": "reference__instance__family__group",
    "annotation.modelresponse": "instance__family__group",
    "annotation.verification": "reference__instance__family__group",
    "annotation.rubric": "tournament__group",
    "annotation.battle": "tournament__group",
    "annotation.humanjudgement": "tournament__group",
    "annotation.judgerun": "tournament__group",
    "annotation.modelendpoint": "tournament__group",
    "annotation.leaderboardresult": "tournament__group",
    "annotation.endpointcall": "endpoint__tournament__group",
    "annotation.judgejudgement": "run__tournament__group",
    "annotation.judgecall": "run__tournament__group",
    "mturk.crowdstudy": "family__group",
    "mturk.hit": "study__family__group",
    "mturk.submission": "study__family__group",
    "mturk.studycompletion": "study__family__group",
    "mturk.bonus": "submission__study__family__group",
    "mturk.auditlog": "study__family__group",
    "webhooks.endpoint": ENDPOINT_GROUPS,
    "webhooks.delivery": tuple(f"endpoint__{path}" for path in ENDPOINT_GROUPS),
}


def scope_key(user):
    """A name for the rows `user` sees, the same for every user who sees the same: a cache key's part
    for a figure computed over them."""
    if user is not None and user.is_superuser:
        return "all"
    held = _roles(user)
    return "groups-" + "-".join(map(str, sorted(held))) if held else "no-group"


def group_path(model):
    """The lookup from `model` to the group that owns its rows, or None for a model no group owns
    (workers, images, qualification tests, background jobs: shared by every group)."""
    return GROUP_PATHS.get(model._meta.label_lower)


def owned_path(model):
    """`group_path(model)` for a page that exists to show group-owned rows: a model missing from
    GROUP_PATHS there is a mistake, raised at once rather than shown to every group."""
    path = group_path(model)
    if path is None:
        raise ImproperlyConfigured(f"{model._meta.label} is shown as group-owned but annotation/teams.py's "
                                   "GROUP_PATHS does not say how it reaches its group.")
    return path


def scoped(queryset, user):
    """`queryset` narrowed to the rows `user` may see, by the path GROUP_PATHS names for its model;
    a model no group owns is returned whole."""
    path = group_path(queryset.model)
    return queryset if path is None else visible(queryset, user, via=path)


def seen_by(model, user):
    """The condition on `model`'s rows that `user` may see, by the path GROUP_PATHS names for it;
    None for every row (a model no group owns, a superuser)."""
    path = group_path(model)
    return None if path is None else _condition(model, user, via=path, roles=frozenset(Role.values))


def owner(row, *, via="group"):
    """The group that owns `row`, reached by `via` as in `visible`; None for a row of no group."""
    for path in _paths(via):
        value = row
        for part in path.split("__"):
            value = getattr(value, part, None) if value is not None else None
        if value is not None:
            return value
    return None


def may_change(user, group, *, roles=CHANGERS):
    """Whether `user` may change a row owned by `group` (None: owned by no group)."""
    if user is not None and user.is_superuser:
        return True
    held = _roles(user)
    if group is None:
        return not held
    return held.get(_id(group)) in roles


def may_change_any(user, *, roles=CHANGERS):
    """Whether `user` changes anything at all: the admin shows them actions and forms."""
    if user is not None and user.is_superuser:
        return True
    held = _roles(user)
    return not held or any(role in roles for role in held.values())


def groups_to_own(user):
    """The groups `user` may put a new family, tournament or snapshot in."""
    if user is not None and user.is_superuser:
        return ResearchGroup.objects.all()
    return ResearchGroup.objects.filter(pk__in=[group for group, role in _roles(user).items() if role in CHANGERS])


def owning_group(*, user, group):
    """The group a new row of `user`'s belongs to: `group` when they may put rows there; a member of
    one group may leave it out. Staff outside groups make rows of no group."""
    if user is not None and user.is_superuser:
        return group
    held = _roles(user)
    if not held:
        if group is not None:
            raise AnnotationError("You belong to no research group; leave the group out.")
        return None
    own = [pk for pk, role in held.items() if role in CHANGERS]
    if group is None:
        if len(own) != 1:
            raise AnnotationError("Name the research group this belongs to: you may make rows in "
                                  f"{len(own)} groups." if own else "Your role in your groups changes nothing.")
        return ResearchGroup.objects.get(pk=own[0])
    if _id(group) not in own:
        raise AnnotationError(f"Your role in “{group}” does not let you make rows there.")
    return group


def _id(group):
    return group if isinstance(group, int) else group.pk


def create_group(*, name):
    name = (name or "").strip()
    if not name:
        raise AnnotationError("A research group needs a name.")
    if ResearchGroup.objects.filter(name=name).exists():
        raise AnnotationError(f"A research group called “{name}” exists already.")
    return ResearchGroup.objects.create(name=name)


def add_member(*, group, user, role):
    """Add `user` to `group` with `role`, or change their role. Members reach the admin and the
    dashboard as staff, with the model permissions of their strongest role (`role_permissions`);
    which rows those permissions reach is decided here, per group."""
    if role not in Role.values:
        raise AnnotationError(f"“{role}” is not a role; choose one of {', '.join(Role.values)}.")
    with transaction.atomic():
        membership, _ = Membership.objects.update_or_create(group=group, user=user, defaults={"role": role})
        grant_role_permissions(user)
    return membership


# From the weakest role to the strongest: a member's model permissions are their strongest role's.
_RANKED = [Role.VIEWER, Role.REVIEWER, Role.RESEARCHER, Role.OWNER]
_APPS = ("annotation", "mturk", "tasks", "webhooks")


def role_permissions(role):
    """The Django model permissions a role needs; the rows they reach are narrowed per group."""
    every = Permission.objects.filter(content_type__app_label__in=_APPS)
    if role == Role.OWNER:
        # Owners read their group's audit trail too (annotation/audit.py narrows it).
        return every | Permission.objects.filter(content_type__app_label="auditlog", codename="view_logentry")
    # Groups and their members are the owners' to manage.
    work = every.exclude(content_type__app_label="annotation", content_type__model__in=["researchgroup", "membership"])
    if role == Role.VIEWER:
        return work.filter(codename__startswith="view_")
    if role == Role.REVIEWER:
        return work.filter(Q(codename__startswith="view_") | Q(codename="change_answer"))
    return work


def grant_role_permissions(user):
    """Put `user` in the Django group of their strongest role (one per role, made on first use)."""
    held = set(Membership.objects.filter(user=user).values_list("role", flat=True))
    role_groups = {role: f"crowdbench {role}s" for role in _RANKED}
    user.groups.remove(*Group.objects.filter(name__in=role_groups.values()))
    if held:
        strongest = max(held, key=_RANKED.index)
        group, _ = Group.objects.get_or_create(name=role_groups[strongest])
        # Set each time, so a model added since the group was made is covered too.
        group.permissions.set(role_permissions(strongest))
        user.groups.add(group)
        if not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])
    user.__dict__.pop("_research_roles", None)
