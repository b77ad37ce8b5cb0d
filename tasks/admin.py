from django.contrib import admin, messages

from annotation import teams
from annotation.admin.paging import LargeTableAdminMixin
from crowdbench.jobs import send
from tasks.models import Job


@admin.register(Job)
class JobAdmin(LargeTableAdminMixin, admin.ModelAdmin):
    """Every background job's latest attempt: a failure shows its reason here."""

    list_display = ["key", "status", "error", "note", "attempts", "queued_at", "updated_at"]
    list_filter = ["status", "task"]
    search_fields = ["key", "error"]
    readonly_fields = ["key", "task", "args", "status", "error", "note", "attempts", "queued_at", "updated_at"]
    actions = ["queue_again"]

    def has_add_permission(self, request):
        return False

    def has_view_permission(self, request, obj=None):
        # Every group's jobs are listed here, their keys and errors naming their rows: for superusers
        # and staff outside groups, as the dashboard's failed jobs are. A group's members see their
        # work's state on its own pages.
        return super().has_view_permission(request, obj) and _outside_groups(request.user)

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and _outside_groups(request.user)


def _outside_groups(user):
    return user.is_superuser or not teams.is_member(user)

    @admin.action(description="Queue again (once the cause of the failure is fixed)", permissions=["change"])
    def queue_again(self, request, queryset):
        sent = sum(send(job.task, *job.args) for job in queryset)
        level = messages.SUCCESS if sent == queryset.count() else messages.WARNING
        self.message_user(request, f"{sent} of {queryset.count()} job(s) queued; a job that could "
                                   "not be queued is retried by the outbox sweep.", level)
