"""The work queue and the workers in the admin."""


from functools import partial

from django.contrib import admin
from django.db.models import Count, Q
from django.urls import path, reverse
from django.utils.html import format_html

from annotation.admin import worker_page
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.models import (
    Assignment,
    Worker,
    WorkerReliability,
    WorkUnit,
)


@admin.register(WorkUnit)
class WorkUnitAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    group_path = "family__group"
    list_display = ["id", "stage", "family", "key", "overlap", "submitted", "status", "surplus", "created_at"]
    list_filter = ["stage", "status", "surplus", "family"]
    search_fields = ["key", "family__name"]
    raw_id_fields = ["instance", "reference", "battle"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("family").annotate(
            n_submitted=Count("assignments", filter=Q(assignments__status=Assignment.Status.SUBMITTED))
        )

    @admin.display(description="submitted", ordering="n_submitted")
    def submitted(self, unit):
        return unit.n_submitted


@admin.register(Assignment)
class AssignmentAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    group_path = "unit__family__group"
    list_display = ["id", "unit", "worker", "status", "leased_at", "lease_expires_at", "submitted_at",
                    "active_seconds"]
    list_filter = ["status", "unit__stage"]
    raw_id_fields = ["unit", "worker", "reviewed_by"]
    readonly_fields = ["leased_at", "submitted_at", "active_seconds"]


@admin.register(Worker)
class WorkerAdmin(LargeTableAdminMixin, admin.ModelAdmin):
    list_display = ["id", "platform", "external_id", "pseudonym", "user", "created_at", "page_link"]
    list_filter = ["platform"]
    search_fields = ["external_id"]
    raw_id_fields = ["user"]
    readonly_fields = ["page_link"]

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
class WorkerReliabilityAdmin(LargeTableAdminMixin, admin.ModelAdmin):
    """Read only: the worker-model job writes these (annotation/worker_models.py)."""

    list_display = ["worker", "stage", "family", "model", "reliability", "answers", "fitted_at"]
    list_filter = ["stage", "model"]
    search_fields = ["worker__external_id"]
    list_select_related = ["worker", "family"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
