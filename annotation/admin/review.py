"""Review in the admin: every submitted answer by stage, family and worker, with the worker's gold
accuracy and time per task beside it; accept or reject (with a reason) one by one or in bulk, and
adjudicate references whose verifiers disagree."""

from django import forms
from django.contrib import admin, messages
from django.db.models import Avg, Case, Count, Exists, FloatField, OuterRef, Q, Subquery, Value, When
from django.urls import reverse
from django.utils.html import format_html

from annotation import review, teams
from annotation.admin.audit import AuditTrailMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.collection import verification
from annotation.exceptions import AnnotationError
from annotation.models import Answer, Assignment, GoldAnswer, Stage, Verification
from mturk.admin.common import form_step
from mturk.services.reviewing import review_on_platforms


class RejectAnswersForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea, max_length=review.REASON_MAX_CHARS,
                             help_text="Kept with each answer. Where the answer was done on a platform, the worker "
                                       "sees it there (Prolific asks for 100 characters or more).")


class AcceptAnswersForm(forms.Form):
    reason = forms.CharField(required=False, widget=forms.Textarea, max_length=review.REASON_MAX_CHARS,
                             help_text="Optional.")


def _gold_accuracy():
    answers = GoldAnswer.objects.filter(worker=OuterRef("worker"), correct__isnull=False).order_by().values("worker")
    return Subquery(answers.annotate(rate=Avg(Case(When(correct=True, then=Value(1.0)), default=Value(0.0),
                                                   output_field=FloatField()))).values("rate"))


def _seconds_per_task():
    done = Assignment.objects.filter(worker=OuterRef("worker"), unit__stage=OuterRef("unit__stage"),
                                     status=Assignment.Status.SUBMITTED, active_seconds__gt=0)
    return Subquery(done.order_by().values("worker").annotate(mean=Avg("active_seconds")).values("mean"))


def _answer_text(answer):
    stage = answer.unit.stage
    if stage == Stage.CAPTION and hasattr(answer, "caption"):
        return " | ".join(answer.caption.texts)
    if stage == Stage.VERIFICATION and hasattr(answer, "verification"):
        vote = answer.verification
        if vote.is_correct:
            text = "correct"
        else:
            where = [name for name, flag in (("caption", vote.problem_in_caption),
                                             ("response", vote.problem_in_response)) if flag]
            text = f"incorrect: problem in the {' and the '.join(where)}"
        return f"{text}{' · harmful' if vote.is_harmful else ''}{f' · {vote.comment}' if vote.comment else ''}"
    if stage == Stage.PAIRWISE and hasattr(answer, "human_judgement"):
        judgement = answer.human_judgement
        return f"chose {judgement.get_choice_display().lower()} ({judgement.get_shown_left_display()})"
    if stage == Stage.INSTRUCTION_GENERATION and hasattr(answer, "instruction_submission"):
        return answer.instruction_submission.instance.instruction
    return "(no answer stored)"


@admin.register(Answer)
class AnswerAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, AuditTrailMixin, admin.ModelAdmin):
    """Answers to review: the reviewer's queue."""

    group_path = "unit__family__group"
    change_roles = teams.REVIEWERS

    list_display = ["id", "task", "answer", "work_state", "reason", "seconds", "worker_link", "submitted_at"]
    list_filter = ["work_state", "unit__stage", "worker__platform", "unit__family"]
    search_fields = ["worker__external_id", "=unit__key"]
    list_select_related = ["unit__family", "worker", "caption", "verification", "human_judgement",
                           "instruction_submission__instance"]
    readonly_fields = ["unit", "worker", "work_state", "review_reason", "reviewed_by", "reviewed_at",
                       "confirmed_at", "submitted_at", "active_seconds", "platform_assignment_id",
                       "platform_listing_id"]
    exclude = ["status", "leased_at", "lease_expires_at"]
    actions = ["accept", "reject"]

    def get_queryset(self, request):
        return (super().get_queryset(request).filter(status=Assignment.Status.SUBMITTED)
                .annotate(gold_accuracy=_gold_accuracy(), seconds_per_task=_seconds_per_task()))

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        # Reviewing is done by the actions; the answer itself never changes.
        return obj is None and super().has_change_permission(request, obj)

    @admin.display(description="task", ordering="unit__stage")
    def task(self, answer):
        return format_html("{}<br><small>{}</small>", answer.unit.get_stage_display(), answer.unit.family)

    @admin.display(description="worker (mean time per task, gold accuracy)", ordering="worker")
    def worker_link(self, answer):
        url = reverse("admin:annotation_answer_changelist") + f"?worker__id__exact={answer.worker_id}"
        seconds = f"{answer.seconds_per_task:.0f} s/task" if answer.seconds_per_task is not None else "- s/task"
        gold = f"gold {answer.gold_accuracy:.0%}" if answer.gold_accuracy is not None else "no gold yet"
        page = reverse("admin:annotation_worker_page", args=[answer.worker_id])
        return format_html('<a href="{}" title="All answers of this worker">{}</a> · <a href="{}" class="worker-page" '
                           'title="Time, gold, agreement and flags of this worker">worker page</a>'
                           '<br><small>{} · {}</small>', url, answer.worker, page, seconds, gold)

    @admin.display(description="answer")
    def answer(self, answer):
        text = _answer_text(answer)
        return format_html('<span title="{}">{}</span>', text, text if len(text) <= 100 else text[:99] + "…")

    @admin.display(description="reason")
    def reason(self, answer):
        text = answer.review_reason
        return format_html('<span title="{}">{}</span>', text, text if len(text) <= 60 else text[:59] + "…")

    @admin.display(description="s", ordering="active_seconds")
    def seconds(self, answer):
        return round(answer.active_seconds) if answer.active_seconds is not None else "-"

    @admin.action(description="Accept the selected answers", permissions=["change"])
    def accept(self, request, queryset):
        form, response = form_step(self, request, queryset, form_class=AcceptAnswersForm,
                                   title="Accept answers", submit_label="Accept", action="accept")
        if response:
            return response
        self._review(request, list(queryset), accept=True, reason=form.cleaned_data["reason"])
        return None

    @admin.action(description="Reject the selected answers (out of every count, asked again of someone else)",
                  permissions=["change"])
    def reject(self, request, queryset):
        form, response = form_step(
            self, request, queryset, form_class=RejectAnswersForm, title="Reject answers", submit_label="Reject",
            action="reject",
            intro="A rejected answer leaves every decision, Table 2, the leaderboard and later snapshots, and its "
                  "task goes back to the queue for a different worker. On a platform the work is rejected there too.")
        if response:
            return response
        self._review(request, list(queryset), accept=False, reason=form.cleaned_data["reason"])
        return None

    def _review(self, request, answers, *, accept, reason):
        review_answers(request, answers, accept=accept, reason=reason)


def review_answers(request, answers, *, accept, reason):
    """Accept or reject answers through the review services, then on their platforms, and tell the
    reviewer what each did: the one way the admin reviews, from the answers list or a worker's page."""
    try:
        if accept:
            outcome = review.accept_work(assignments=answers, reviewer=request.user, reason=reason)
        else:
            outcome = review.reject_work(assignments=answers, reviewer=request.user, reason=reason)
    except AnnotationError as error:
        messages.error(request, str(error))
        return False
    messages.success(request, outcome.message("accepted" if accept else "rejected"))
    for line in review_on_platforms(assignments=answers, actor=request.user, reason=reason):
        messages.info(request, line)
    return True


class AdjudicateForm(forms.Form):
    verdict = forms.ChoiceField(choices=[("correct", "Correct"), ("caption", "Incorrect: problem in the caption"),
                                         ("response", "Incorrect: problem in the response"),
                                         ("both", "Incorrect: problem in both")])
    note = forms.CharField(widget=forms.Textarea, help_text="Why; kept with the decision.")


class DisagreementFilter(admin.SimpleListFilter):
    title = "verifiers"
    parameter_name = "verifiers"

    def lookups(self, request, model_admin):
        return [("disagree", "disagree"), ("adjudicated", "adjudicated")]

    def queryset(self, request, queryset):
        votes = Verification.objects.filter(reference=OuterRef("pk"))
        if self.value() == "disagree":
            return queryset.filter(Exists(votes.filter(is_correct=True)), Exists(votes.filter(is_correct=False)))
        if self.value() == "adjudicated":
            return queryset.filter(adjudicated_by__isnull=False)
        return queryset


def adjudicate_action(modeladmin, request, queryset):
    form, response = form_step(modeladmin, request, queryset, form_class=AdjudicateForm,
                               title="Adjudicate references", submit_label="Decide", action="adjudicate",
                               intro="Your decision replaces the verifiers' agreement rule for these references "
                                     "and is recorded as an adjudication.")
    if response:
        return response
    verdict = form.cleaned_data["verdict"]
    decided = 0
    for reference in queryset:
        try:
            verification.adjudicate(reference=reference, reviewer=request.user, is_correct=verdict == "correct",
                                    problem_in_caption=verdict in ("caption", "both"),
                                    problem_in_response=verdict in ("response", "both"),
                                    note=form.cleaned_data["note"])
        except AnnotationError as error:
            modeladmin.message_user(request, str(error), messages.ERROR)
            continue
        decided += 1
    modeladmin.message_user(request, f"{decided} reference(s) decided by adjudication.", messages.SUCCESS)
    return None


adjudicate_action.short_description = "Adjudicate (where verifiers disagree)"
adjudicate_action.__name__ = "adjudicate"


def votes_counts():
    """Annotations of a reference queryset with its votes, for `votes_summary` (no query a row)."""
    return {"correct_votes": Count("verifications", filter=Q(verifications__is_correct=True)),
            "incorrect_votes": Count("verifications", filter=Q(verifications__is_correct=False))}


def votes_summary(reference):
    return f"{reference.correct_votes} correct, {reference.incorrect_votes} incorrect"


