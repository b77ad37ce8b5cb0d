"""Qualification tests, gold items, attempts and answers, worker standing, and the audit log of
every payment action."""

from django import forms
from django.contrib import admin
from django.utils.functional import cached_property

from annotation.admin.audit import AuditTrailMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.models import (
    GoldAnswer,
    GoldItem,
    QualificationAttempt,
    StageQualification,
    WorkerQualification,
)
from annotation.workforce import qualifications
from mturk.models import AuditLog


class GoldItemForm(forms.ModelForm):
    """A saved gold item left as it was is not written again, so it is not checked again: one saved
    before a rule existed would otherwise block every edit of its qualification. It is checked as
    soon as it is changed, and when its qualification's stage changes: each item is then asked again
    under the new stage, refused at its own fields with its own reason (fixable in the same save),
    and written as the check leaves it (a verdict's spelling made the stage's)."""

    @cached_property
    def _stage_moved(self):
        # The qualification as this save would make it: an inline's own link to its parent form's object.
        qualification = getattr(self.fields.get("qualification"), "parent_instance", None)
        if qualification is None or qualification.pk is None:
            return False
        saved = StageQualification.objects.filter(pk=qualification.pk).values_list("stage", flat=True).first()
        return saved != qualification.stage

    def has_changed(self):
        return super().has_changed() or (self.instance.pk is not None and self._stage_moved)

    def _post_clean(self):
        if self.instance.pk is not None and not self.has_changed():
            return
        super()._post_clean()


class GoldItemInline(admin.StackedInline):
    model = GoldItem
    form = GoldItemForm
    extra = 0


@admin.register(StageQualification)
class StageQualificationAdmin(AuditTrailMixin, admin.ModelAdmin):
    list_display = ["name", "stage", "test_size", "pass_score", "live_accuracy_bar", "gold_items_count",
                    "mturk_qualification_type_id"]
    readonly_fields = ["mturk_qualification_type_id", "mturk_environment"]
    inlines = [GoldItemInline]

    @admin.display(description="gold items")
    def gold_items_count(self, qualification):
        return qualification.gold_items.filter(active=True).count()


@admin.register(GoldItem)
class GoldItemAdmin(admin.ModelAdmin):
    list_display = ["id", "qualification", "kind", "question", "in_test", "in_live_work", "active"]
    list_filter = ["qualification", "kind", "in_test", "in_live_work", "active"]


@admin.register(QualificationAttempt)
class QualificationAttemptAdmin(LargeTableAdminMixin, admin.ModelAdmin):
    """Who took which test, when, and how it went. A record, read only: attempts are scored as they
    are submitted, and a free-text answer waiting for review is marked under Gold answers."""

    list_display = ["started_at", "qualification", "worker", "platform", "status", "score",
                    "submitted_at"]
    list_filter = ["status", "qualification", "worker__platform"]
    list_select_related = ["qualification", "worker"]
    date_hierarchy = "started_at"
    fields = ["qualification", "worker", "status", "score", "started_at", "submitted_at", "item_ids"]
    readonly_fields = fields

    @admin.display(description="platform", ordering="worker__platform")
    def platform(self, attempt):
        return attempt.worker.get_platform_display()

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(GoldAnswer)
class GoldAnswerAdmin(LargeTableAdminMixin, admin.ModelAdmin):
    list_display = ["id", "item", "worker", "source", "answer", "correct", "reviewed_by", "created_at"]
    list_filter = ["source", "correct", "item__kind"]
    readonly_fields = ["item", "worker", "attempt", "source", "answer", "correct", "reviewed_by"]
    actions = ["mark_correct", "mark_incorrect"]

    def has_add_permission(self, request):
        return False

    def _mark(self, request, queryset, correct):
        for answer in queryset:
            qualifications.review_free_text_answer(answer=answer, correct=correct,
                                                   reviewer=request.user)

    @admin.action(description="Mark correct (free-text review)", permissions=["change"])
    def mark_correct(self, request, queryset):
        self._mark(request, queryset, True)

    @admin.action(description="Mark incorrect (free-text review)", permissions=["change"])
    def mark_incorrect(self, request, queryset):
        self._mark(request, queryset, False)


@admin.register(WorkerQualification)
class WorkerQualificationAdmin(LargeTableAdminMixin, AuditTrailMixin, admin.ModelAdmin):
    list_display = ["worker", "qualification", "status", "test_score", "live_accuracy",
                    "live_answers", "paused_at", "mturk_granted", "note"]
    list_filter = ["status", "qualification", "mturk_granted"]
    readonly_fields = ["worker", "qualification", "test_score", "live_accuracy", "live_answers",
                       "granted_at", "paused_at", "mturk_granted"]
    actions = ["resume"]

    @admin.action(description="Resume paused workers", permissions=["change"])
    def resume(self, request, queryset):
        for granted in queryset.filter(status=WorkerQualification.Status.PAUSED):
            qualifications.resume_worker(granted=granted, actor=request.user)


@admin.register(AuditLog)
class AuditLogAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "action", "platform", "study", "worker", "amount_usd", "actor", "ok",
                    "sent_to_platform", "error"]
    list_filter = ["action", "platform", "ok", "sent_to_platform"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
