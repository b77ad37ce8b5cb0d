"""Research groups in the admin, and the one rule every page of a group-owned model follows
(annotation/teams.py): a member sees their groups' rows and changes them as their role allows."""

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import NotRelationField, get_fields_from_path
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist, PermissionDenied

from annotation import teams
from annotation.admin.audit import AuditTrailMixin
from annotation.models import Membership, ResearchGroup


class GroupScopedAdminMixin:
    """For the admin of a model owned through a research group, which it reaches by the path
    annotation/teams.py's GROUP_PATHS names; `change_roles` the roles that may change its rows
    (reviewers review answers, nothing else)."""

    change_roles = teams.CHANGERS

    @property
    def group_path(self):
        return teams.owned_path(self.model)

    def get_queryset(self, request):
        rows = teams.visible(super().get_queryset(request), request.user, via=self.group_path)
        if request.method == "POST" and "action" in request.POST:
            # An action runs on the selected rows of this queryset: only rows the user may change.
            rows = teams.changeable(rows, request.user, via=self.group_path, roles=self.change_roles)
        return rows

    def get_actions(self, request):
        # Every action here changes rows: none for a member whose roles change nothing.
        if not teams.may_change_any(request.user, roles=self.change_roles):
            return {}
        return super().get_actions(request)

    def _owner(self, obj):
        return teams.owner(obj, via=self.group_path)

    def has_change_permission(self, request, obj=None):
        if not super().has_change_permission(request, obj):
            return False
        if obj is None:
            return teams.may_change_any(request.user, roles=self.change_roles)
        return teams.may_change(request.user, self._owner(obj), roles=self.change_roles)

    def has_delete_permission(self, request, obj=None):
        if not super().has_delete_permission(request, obj):
            return False
        if obj is None:
            return teams.may_change_any(request.user)
        return teams.may_change(request.user, self._owner(obj))

    def has_add_permission(self, request, *args):
        return super().has_add_permission(request, *args) and teams.may_change_any(request.user)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "group" and db_field.related_model is ResearchGroup:
            kwargs["queryset"] = teams.groups_to_own(request.user)
            # A member's new rows belong to one of their groups; outside groups, to none.
            kwargs["required"] = teams.is_member(request.user) and not request.user.is_superuser
            if kwargs["required"]:
                kwargs["help_text"] = "The research group that owns it: one of yours."
        elif teams.group_path(db_field.related_model):
            # A judge call's run, a hit's study: only the ones this member may change.
            kwargs["queryset"] = self._choosable(db_field.related_model, request)
            if (_owned_through(self.model, db_field.name) and teams.is_member(request.user)
                    and not request.user.is_superuser):
                # The row's group is reached through this field (a study's family): left empty, a
                # member's row would be of no group, hidden from its maker and drawing on the work
                # of no group.
                kwargs["required"] = True
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        # A tournament's families, a snapshot's tournaments: only the ones this member may change.
        if teams.group_path(db_field.related_model):
            kwargs["queryset"] = self._choosable(db_field.related_model, request)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def _choosable(self, related, request):
        # A row written here may point only at rows its writer may change: seeing a group is not
        # writing into it (a response to its instance) or drawing on it from another group (a
        # tournament of its families), which a member of two groups, viewer of one, could do.
        return teams.changeable(related.objects.all(), request.user, via=teams.group_path(related),
                                roles=self.change_roles)

    def save_form(self, request, form, change):
        row = super().save_form(request, form, change)
        # Every way a row is written from its page, added or changed, ends in a group its writer
        # changes: the choices above narrow what is offered, this refuses what is posted.
        if not teams.may_change(request.user, self._owner(row), roles=self.change_roles):
            raise PermissionDenied("This row would belong to a research group you may not change.")
        return row

    def get_list_filter(self, request):
        # Django's filter by a related row lists every row of that model (every group's family
        # names); ScopedRelatedFilter lists only those this member may see.
        return [_related_only(self.model, entry) for entry in super().get_list_filter(request)]


class ScopedRelatedFilter(admin.RelatedOnlyFieldListFilter):
    """A filter by a related row listing the rows of it the user may see: a group-owned one (a
    family, a tournament) read from its own table, scoped; any other, those the rows on this page
    reach. Reaching the families through the answers took a DISTINCT over every submitted answer,
    365 ms of the answers list at 1.4 million answers, to list 50 families."""

    def field_choices(self, field, request, model_admin):
        related = field.related_model
        if not teams.group_path(related):
            return super().field_choices(field, request, model_admin)
        ordering = self.field_admin_ordering(field, request, model_admin)
        seen = teams.scoped(related.objects.all(), request.user).values("pk")
        return field.get_choices(include_blank=False, limit_choices_to={"pk__in": seen}, ordering=ordering)


def _owned_through(model, field_name):
    path = teams.group_path(model)
    return isinstance(path, str) and path.startswith(f"{field_name}__")


def _related_only(model, entry):
    if not isinstance(entry, str):
        return entry
    try:
        field = get_fields_from_path(model, entry)[-1]
    except (FieldDoesNotExist, NotRelationField):
        return entry
    return (entry, ScopedRelatedFilter) if field.is_relation else entry


class MembershipForm(forms.ModelForm):
    # A member is named by their user name: an owner, who may not read the list of users, could not
    # search it (the autocomplete answered 403), and a list of every user would show them all.
    user = forms.ModelChoiceField(
        queryset=get_user_model().objects.all(), to_field_name=get_user_model().USERNAME_FIELD,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
        help_text="Their user name, exactly.",
        error_messages={"invalid_choice": "No user is named “%(value)s”."})

    class Meta:
        model = Membership
        fields = ["user", "role"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.user_id is not None:
            self.initial["user"] = self.instance.user.get_username()  # not their id


class MembershipInline(admin.TabularInline):
    model = Membership
    form = MembershipForm
    extra = 1


@admin.register(ResearchGroup)
class ResearchGroupAdmin(AuditTrailMixin, admin.ModelAdmin):
    """Superusers make groups; a group's owners add and remove its members and set their roles."""

    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]

    def get_queryset(self, request):
        groups = super().get_queryset(request)
        if request.user.is_superuser:
            return groups
        return teams.changeable(groups, request.user, via="pk", roles={teams.Role.OWNER})

    def has_add_permission(self, request):
        return request.user.is_superuser

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        # A member's model permissions follow their roles, whichever way the roles changed.
        for formset in formsets:
            for membership in [*formset.new_objects, *formset.changed_objects]:
                member = membership[0] if isinstance(membership, tuple) else membership
                teams.grant_role_permissions(member.user)
            for membership in formset.deleted_objects:
                teams.grant_role_permissions(membership.user)
