"""Every researcher-facing admin page's "History" shows the object's audit trail (annotation/audit.py):
what the admin's forms changed and what the services, jobs and reviews did to it, with who and when."""

from auditlog.admin import LogEntryAdmin
from auditlog.mixins import AuditlogHistoryAdminMixin
from auditlog.models import LogEntry
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.http import Http404

from annotation.audit import visible_entries


class AuditTrailMixin(AuditlogHistoryAdminMixin):
    # Django's own history holds only what was saved through an admin form; the audit trail holds
    # that and every other change, so the one History button leads there.
    def history_view(self, request, object_id, extra_context=None):
        return self.auditlog_history_view(request, object_id, extra_context)

    def auditlog_history_view(self, request, object_id, extra_context=None):
        # get_object reads the admin's queryset, so a row of another research group is None here:
        # it does not exist for this user, and its trail is not read at all.
        if self.get_object(request, unquote(object_id)) is None:
            raise Http404("No such object.")
        return super().auditlog_history_view(request, object_id, extra_context)


# django-auditlog's own admin lists every entry to whoever holds "view log entry"; a group owner
# holds it (annotation/teams.py's role_permissions), and reads their group's rows' entries only.
admin.site.unregister(LogEntry)


@admin.register(LogEntry)
class GroupLogEntryAdmin(LogEntryAdmin):
    def get_queryset(self, request):
        return visible_entries(super().get_queryset(request), request.user)
