"""The work queue and the workers in the admin."""


from functools import partial

from django.contrib import admin
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.urls import path, reverse
from django.utils.html import format_html

from annotation.admin import worker_page
from annotation.admin.page_rows import PageRowsAdminMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.search import SearchFieldByFieldMixin, workers_with_pseudonym
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.figures import duration
from annotation.models import (
    Assignment,
    Worker,
    WorkerReliability,
    WorkUnit,
)


def _submitted_count(unit_ref):
    return (Assignment.objects.filter(unit=unit_ref, status=Assignment.Status.SUBMITTED).order_by()
            .values("unit").annotate(n=Count("*")).values("n"))


@admin.register(WorkUnit)
class WorkUnitAdmin(PageRowsAdminMixin, SearchFieldByFieldMixin, LargeTableAdminMixin, GroupScopedAdminMixin,
                    admin.ModelAdmin):
    list_display = ["id", "stage", "family", "key", "overlap", "submitted", "status", "surplus", "created_at"]
    list_filter = ["stage", "status", "surplus", "family"]
    # A key is an identifier, pasted whole (its own index answers it); a family by a word of its name.
    search_fields = ["key__exact", "family__name"]
    search_help_text = "A unit's key, whole (e.g. battle-1234 or instance-42-round-1), or a word of its family's name."
    list_select_related = ["family"]
    raw_id_fields = ["instance", "reference", "battle"]

    def fill_page_rows(self, request, rows):
        counts = dict(Assignment.objects.filter(unit__in=rows, status=Assignment.Status.SUBMITTED).order_by()
                      .values("unit").annotate(n=Count("*")).values_list("unit", "n"))
        for unit in rows:
            unit.n_submitted = counts.get(unit.pk, 0)

    @admin.display(description="submitted",
                   ordering=Coalesce(Subquery(_submitted_count(OuterRef("pk"))), 0))
    def submitted(self, unit):
        return unit.n_submitted


@admin.register(Assignment)
class AssignmentAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    list_display = ["id", "unit", "worker", "status", "leased_at", "lease_expires_at", "submitted_at",
                    "active_time"]
    list_filter = ["status", "unit__stage"]
    raw_id_fields = ["unit", "worker", "reviewed_by"]
    readonly_fields = ["leased_at", "submitted_at", "active_time"]
    exclude = ["active_seconds"]

    @admin.display(description="active time", ordering="active_seconds")
    def active_time(self, assignment):
        return duration(assignment.active_seconds)


@admin.register(Worker)
class WorkerAdmin(SearchFieldByFieldMixin, LargeTableAdminMixin, admin.ModelAdmin):
    list_display = ["id", "platform", "external_id", "pseudonym", "user", "created_at", "page_link"]
    list_filter = ["platform"]
    # What the list shows of a worker finds them: their platform id, their pseudonym
    # (search_beyond_fields) and an in-house worker's user name.
    search_fields = ["external_id", "=user__username"]
    search_help_text = "A worker's ID on their platform (or part of it), pseudonym (w_…), or user name."
    raw_id_fields = ["user"]
    readonly_fields = ["page_link"]

    def search_beyond_fields(self, word):
        return [Worker.objects.filter(pk__in=workers_with_pseudonym(word))]

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<int:worker_id>/page/", wrap(partial(worker_page.worker_page_view, model_admin=self)),
                 name="annotation_worker_page"),
            path("<int:worker_id>/page/review/", wrap(partial(worker_page.worker_review_view, model_admin=self)),
                 name="annotation_worker_review"),
        ] + super().get_urls()

    @admin.display(description="worker page")
    def page_link(self, worker):
        if not worker.pk:
            return "-"
        return format_html('<a href="{}">Time, gold, agreement, flags and review</a>',
                           reverse("admin:annotation_worker_page", args=[worker.pk]))


@admin.register(WorkerReliability)
class WorkerReliabilityAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    """Read only: the worker-model job writes these (annotation/worker_models.py)."""

    list_display = ["worker", "stage", "family", "model", "reliability", "answers", "fitted_at"]
    list_filter = ["stage", "model"]
    search_fields = ["worker__external_id"]
    list_select_related = ["worker", "family"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
