"""The review queue in the admin: approve, reject, bonus, block and notify in bulk; bonuses and blocks."""

from django import forms
from django.contrib import admin, messages

from annotation.admin.actions import each_selected
from annotation.admin.audit import AuditTrailMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.platform_actions import (
    STOP_WORKERS_HELP,
    STOP_WORKERS_LABEL,
    PayPermissionMixin,
    form_step,
    report,
    stop_workers_and_say,
)
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.models import WorkerBlock
from mturk.exceptions import PlatformError
from mturk.models import Bonus, Submission
from mturk.platforms.prolific import REJECTION_CATEGORIES
from mturk.services import reviewing


class ApproveForm(forms.Form):
    feedback = forms.CharField(required=False, max_length=1024, widget=forms.Textarea,
                               help_text="Optional; the worker sees it.")


class RejectForm(forms.Form):
    message = forms.CharField(max_length=1024, widget=forms.Textarea,
                              help_text="Required; the worker sees it. Prolific needs 100+ characters.")
    category = forms.ChoiceField(required=False, choices=[("", "-")] + [
        (c, c.replace("_", " ").lower()) for c in REJECTION_CATEGORIES],
        help_text="Prolific only.")
    stop_workers = forms.BooleanField(required=False, label=STOP_WORKERS_LABEL, help_text=STOP_WORKERS_HELP)


class BonusForm(forms.Form):
    amount = forms.DecimalField(min_value=0.01, max_digits=8, decimal_places=2, label="Amount (USD)")
    reason = forms.CharField(widget=forms.Textarea, help_text="The worker sees it.")


class BlockForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea, help_text="MTurk shows it to the worker.")


class NotifyForm(forms.Form):
    subject = forms.CharField(max_length=200)
    message = forms.CharField(max_length=4096, widget=forms.Textarea)


@admin.register(Submission)
class SubmissionAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, PayPermissionMixin, admin.ModelAdmin):
    list_display = ["id", "worker_pseudonym", "study", "hit", "platform_status", "review",
                    "flag_reason", "submitted_at"]
    list_filter = ["review", "study", "study__platform"]
    readonly_fields = ["study", "worker_pseudonym", "hit", "platform_assignment_id", "session_id",
                       "platform_status", "review", "flag_reason", "feedback", "submitted_at",
                       "reviewed_at", "reviewed_by", "assignments"]
    exclude = ["worker", "platform_record"]
    actions = ["approve", "reject", "bonus", "block", "notify"]

    def has_add_permission(self, request):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("worker", "study", "hit")

    @admin.display(description="worker")
    def worker_pseudonym(self, submission):
        return submission.worker.pseudonym

    @admin.action(description="Approve (after our checks and the platform's)", permissions=["pay"])
    def approve(self, request, queryset):
        form, response = form_step(self, request, queryset, form_class=ApproveForm,
                                    title="Approve work", submit_label="Approve", action="approve")
        if response:
            return response
        done, problems = reviewing.approve_submissions(
            submissions=list(queryset), actor=request.user, feedback=form.cleaned_data["feedback"])
        report(self, request, done, problems, "Approved")
        return None

    @admin.action(description="Reject with a message", permissions=["pay"])
    def reject(self, request, queryset):
        form, response = form_step(self, request, queryset, form_class=RejectForm,
                                    title="Reject work", submit_label="Reject", action="reject")
        if response:
            return response
        try:
            done, problems = reviewing.reject_submissions(
                submissions=list(queryset), actor=request.user,
                message=form.cleaned_data["message"], category=form.cleaned_data["category"])
        except PlatformError as error:
            self.message_user(request, str(error), messages.ERROR)
            return None
        report(self, request, done, problems, "Rejected")
        if form.cleaned_data["stop_workers"] and done:
            stop_workers_and_say(request, {submission.worker for submission in done},
                                 reason=form.cleaned_data["message"])
        return None

    @admin.action(description="Pay a bonus", permissions=["pay"])
    def bonus(self, request, queryset):
        form, response = form_step(self, request, queryset, form_class=BonusForm,
                                    title="Pay a bonus", submit_label="Pay", action="bonus")
        if response:
            return response
        amount, reason = form.cleaned_data["amount"], form.cleaned_data["reason"]

        def pay(submission):
            bonus = reviewing.create_bonus(submission=submission, actor=request.user, amount=amount,
                                           reason=reason)
            reviewing.pay_bonus(bonus=bonus, actor=request.user)
            return bonus

        for submission, bonus in each_selected(self, request, queryset, pay,
                                               label=lambda submission: submission.worker):
            self.message_user(request, f"Paid ${bonus.amount_usd} to {submission.worker}.")
        return None

    @admin.action(description="Block these workers", permissions=["pay"])
    def block(self, request, queryset):
        form, response = form_step(self, request, queryset, form_class=BlockForm,
                                    title="Block workers", submit_label="Block", action="block")
        if response:
            return response
        reason = form.cleaned_data["reason"]
        each_selected(self, request, queryset, lambda submission: reviewing.block_worker(
            worker=submission.worker, study=submission.study, reason=reason, actor=request.user),
            label=lambda submission: submission.worker)
        return None

    @admin.action(description="Message these workers", permissions=["pay"])
    def notify(self, request, queryset):
        form, response = form_step(self, request, queryset, form_class=NotifyForm,
                                    title="Message workers", submit_label="Send", action="notify")
        if response:
            return response
        by_study = {}
        for submission in queryset.select_related("study", "worker"):
            by_study.setdefault(submission.study, set()).add(submission.worker)
        subject, message = form.cleaned_data["subject"], form.cleaned_data["message"]
        sent = each_selected(self, request, by_study, lambda study: reviewing.notify_workers(
            study=study, workers=by_study[study], actor=request.user, subject=subject,
            message=message))
        for study, notification in sent:
            self.message_user(request, f"{study}: {notification.message}")
        return None


@admin.register(Bonus)
class BonusAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, PayPermissionMixin, admin.ModelAdmin):
    list_display = ["id", "submission", "amount_usd", "status", "platform_reference", "created_by",
                    "paid_at", "error"]
    list_filter = ["status"]
    readonly_fields = ["submission", "amount_usd", "reason", "status", "platform_reference", "error",
                       "created_by", "created_at", "paid_at"]
    actions = ["pay_selected"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Pay selected bonuses (never twice)", permissions=["pay"])
    def pay_selected(self, request, queryset):
        each_selected(self, request, queryset,
                      lambda bonus: reviewing.pay_bonus(bonus=bonus, actor=request.user),
                      label=lambda bonus: f"Bonus {bonus.pk}")


@admin.register(WorkerBlock)
class WorkerBlockAdmin(LargeTableAdminMixin, AuditTrailMixin, admin.ModelAdmin):
    list_display = ["worker", "reason", "active", "created_by", "created_at"]
    list_filter = ["active"]
    readonly_fields = ["worker", "reason", "created_by", "created_at"]

    def has_add_permission(self, request):
        return False
