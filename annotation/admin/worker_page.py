"""A worker's page for researchers: what annotation/worker_report.py finds, the answers to review
one click away (all, per stage, the provisional ones), and accepting or rejecting every provisional
answer of the worker (or of one stage) with a reason, through the same review as the answers list."""

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation import teams
from annotation.admin.platform_actions import STOP_WORKERS_HELP, STOP_WORKERS_LABEL, may_block
from annotation.admin.review import review_answers
from annotation.crowdwork import review
from annotation.models import Assignment, Stage, Worker, WorkState
from annotation.worker_report import (
    EXACT_MEDIAN_UP_TO,
    FAST_SHARE,
    MIN_ANSWERS,
    P_VALUE,
    STAGE_MEDIAN_SECONDS,
    worker_report,
)


class ReviewProvisionalForm(forms.Form):
    # No choice is made for the reviewer: a page that came up on "Reject" rejected whatever was
    # submitted without a look at it.
    decision = forms.ChoiceField(choices=[("accept", "Accept"), ("reject", "Reject")], widget=forms.RadioSelect,
                                 error_messages={"required": "Choose Accept or Reject: nothing was reviewed."})
    stage = forms.ChoiceField(choices=[("", "Every stage"), *Stage.choices], required=False)
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=review.REASON_MAX_CHARS,
                             required=False,
                             help_text="Kept with each answer; needed to reject. Where the answer was done on a "
                                       "platform, the worker sees it there (Prolific asks for 100 characters or more).")
    stop_workers = forms.BooleanField(required=False, label=STOP_WORKERS_LABEL, help_text=STOP_WORKERS_HELP)

    def __init__(self, *args, may_stop_workers=False, **kwargs):
        super().__init__(*args, **kwargs)
        if not may_stop_workers:
            del self.fields["stop_workers"]

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("stop_workers") and cleaned.get("decision") != "reject":
            raise forms.ValidationError("A worker is stopped along with a rejection; choose Reject, or untick "
                                        "“stop this worker”.")
        return cleaned


def answers_url(worker, **filters):
    """The answers to review, filtered to this worker (and `filters`: a stage, a work state)."""
    query = {"worker__id__exact": worker.pk, **{f"{name}__exact": value for name, value in filters.items()}}
    return reverse("admin:annotation_answer_changelist") + "?" + urlencode(query)


def _provisional(worker, stage):
    answers = Assignment.objects.filter(worker=worker, status=Assignment.Status.SUBMITTED,
                                        work_state=WorkState.PROVISIONAL)
    return answers.filter(unit__stage=stage) if stage else answers


def worker_page_view(request, worker_id, *, model_admin):
    worker = get_object_or_404(Worker, pk=worker_id)
    if not model_admin.has_view_permission(request, worker):
        raise PermissionDenied
    report = worker_report(worker, user=request.user)
    context = {
        **model_admin.admin_site.each_context(request), "opts": model_admin.opts, "original": worker,
        "title": f"Worker {worker}", "report": report,
        "stages": [(row, answers_url(worker, unit__stage=row.stage),
                    answers_url(worker, unit__stage=row.stage, work_state=WorkState.PROVISIONAL))
                   for row in report.stages],
        "all_answers_url": answers_url(worker),
        "provisional_url": answers_url(worker, work_state=WorkState.PROVISIONAL),
        "flags": [(flag, answers_url(worker, unit__stage=flag.stage)) for flag in report.flags],
        "provisional": sum(row.provisional for row in report.stages),
        "can_review": request.user.has_perm("annotation.change_answer"),
        "form": ReviewProvisionalForm(may_stop_workers=may_block(request.user)),
        "min_answers": MIN_ANSWERS, "fast_share": FAST_SHARE, "p_value": P_VALUE,
        "exact_median_up_to": f"{EXACT_MEDIAN_UP_TO:,}", "stage_median_minutes": STAGE_MEDIAN_SECONDS // 60,
    }
    return TemplateResponse(request, "admin/annotation/worker/page.html", context)


@require_POST
def worker_review_view(request, worker_id, *, model_admin):
    worker = get_object_or_404(Worker, pk=worker_id)
    if not request.user.has_perm("annotation.change_answer"):
        raise PermissionDenied
    page = reverse("admin:annotation_worker_page", args=[worker.pk])
    form = ReviewProvisionalForm(request.POST, may_stop_workers=may_block(request.user))
    if not form.is_valid():
        for errors in form.errors.values():
            messages.error(request, " ".join(errors))
        return redirect(page)
    # The worker is every group's; the answers this user reviews are those of their groups.
    answers = list(teams.changeable(_provisional(worker, form.cleaned_data["stage"]), request.user,
                                    via=teams.owned_path(Assignment), roles=teams.REVIEWERS).order_by("pk"))
    if not answers:
        messages.warning(request, "No provisional answer to review there.")
        return redirect(page)
    review_answers(request, answers, accept=form.cleaned_data["decision"] == "accept",
                   reason=form.cleaned_data["reason"], stop_workers=form.cleaned_data.get("stop_workers", False))
    return redirect(page)
