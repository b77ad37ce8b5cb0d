"""Review in the admin: every submitted answer by stage, family and worker, with the worker's gold
accuracy and time per task beside it; accept or reject (with a reason) one by one or in bulk, and
adjudicate references whose verifiers disagree."""

from functools import partial

from django import forms
from django.contrib import admin, messages
from django.db.models import Avg, Case, Count, Exists, FloatField, OuterRef, Q, Value, When, prefetch_related_objects
from django.urls import reverse
from django.utils.html import format_html

from annotation import teams
from annotation.admin.audit import AuditTrailMixin
from annotation.admin.page_rows import PageRowsAdminMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.platform_actions import (
    STOP_WORKERS_HELP,
    STOP_WORKERS_LABEL,
    form_step,
    may_block,
    stop_workers_and_say,
)
from annotation.admin.search import SearchFieldByFieldMixin, workers_with_pseudonym
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.collection import verification
from annotation.crowdwork import review
from annotation.exceptions import AnnotationError
from annotation.figures import duration
from annotation.models import Answer, Assignment, GoldAnswer, Stage, Verification, counted_verifications


class RejectAnswersForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea, max_length=review.REASON_MAX_CHARS,
                             help_text="Kept with each answer. Where the answer was done on a platform, the worker "
                                       "sees it there (Prolific asks for 100 characters or more).")
    stop_workers = forms.BooleanField(required=False, label=STOP_WORKERS_LABEL, help_text=STOP_WORKERS_HELP)

    def __init__(self, *args, may_stop_workers=False, **kwargs):
        super().__init__(*args, **kwargs)
        if not may_stop_workers:
            # A reviewer who may not block is not offered it, rather than refused after rejecting.
            del self.fields["stop_workers"]


class AcceptAnswersForm(forms.Form):
    reason = forms.CharField(required=False, widget=forms.Textarea, max_length=review.REASON_MAX_CHARS,
                             help_text="Optional.")


def _gold_accuracy(workers):
    """{worker id: share of their scored gold answers that were correct}."""
    rows = (GoldAnswer.objects.filter(worker__in=workers, correct__isnull=False).order_by().values("worker")
            .annotate(rate=Avg(Case(When(correct=True, then=Value(1.0)), default=Value(0.0),
                                    output_field=FloatField()))))
    return {row["worker"]: row["rate"] for row in rows}


def _seconds_per_task(workers, stages):
    """{(worker id, stage): their mean active time over their submitted answers at that stage}."""
    rows = (Assignment.objects.filter(worker__in=workers, unit__stage__in=stages, status=Assignment.Status.SUBMITTED,
                                      active_seconds__gt=0)
            .order_by().values("worker", "unit__stage").annotate(mean=Avg("active_seconds")))
    return {(row["worker"], row["unit__stage"]): row["mean"] for row in rows}


# Where an answer's content is, by stage (read by _answer_text).
ANSWER_HELD_IN = ["caption", "verification", "human_judgement", "instruction_submission__instance"]


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
class AnswerAdmin(PageRowsAdminMixin, SearchFieldByFieldMixin, LargeTableAdminMixin, GroupScopedAdminMixin,
                  AuditTrailMixin, admin.ModelAdmin):
    """Answers to review: the reviewer's queue."""

    change_roles = teams.REVIEWERS

    list_display = ["id", "task", "answer", "work_state", "reason", "seconds", "worker_link", "submitted_at"]
    list_filter = ["work_state", "unit__stage", "worker__platform", "unit__family"]
    # Identifiers, pasted whole: an exact match is what their indexes answer at once. A worker is
    # found by what the list shows of them (their pseudonym, search_beyond_fields), by their id on
    # their platform, or by the user name an in-house worker signs in with.
    search_fields = ["worker__external_id__exact", "=worker__user__username", "unit__key__exact"]
    search_help_text = ("A worker as the list shows them (mturk:w_3f9a1c2b7d4e8a10, or w_3f9a1c2b7d4e8a10), "
                        "their ID on their platform, or an in-house worker's user name; or a work unit's key "
                        "(e.g. battle-1234); each whole.")
    list_select_related = ["unit__family", "worker"]
    readonly_fields = ["unit", "worker", "work_state", "review_reason", "reviewed_by", "reviewed_at",
                       "confirmed_at", "submitted_at", "active_seconds", "platform_assignment_id",
                       "platform_listing_id"]
    exclude = ["status", "leased_at", "lease_expires_at"]
    actions = ["accept", "reject"]

    def get_queryset(self, request):
        return super().get_queryset(request).filter(status=Assignment.Status.SUBMITTED)

    def search_beyond_fields(self, word):
        return [Assignment.objects.filter(worker_id__in=workers_with_pseudonym(word))]

    def fill_page_rows(self, request, rows):
        # What each answer holds, fetched for the page rather than joined into the list's query:
        # past eight joined tables PostgreSQL stops reordering joins, and a search's few rows
        # would be found only after joining every answer.
        prefetch_related_objects(rows, *ANSWER_HELD_IN)
        workers = {answer.worker_id for answer in rows}
        gold = _gold_accuracy(workers)
        seconds = _seconds_per_task(workers, {answer.unit.stage for answer in rows})
        for answer in rows:
            answer.gold_accuracy = gold.get(answer.worker_id)
            answer.seconds_per_task = seconds.get((answer.worker_id, answer.unit.stage))

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

    @admin.display(description="active time", ordering="active_seconds")
    def seconds(self, answer):
        return duration(answer.active_seconds)

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
            self, request, queryset, title="Reject answers", submit_label="Reject",
            form_class=partial(RejectAnswersForm, may_stop_workers=may_block(request.user)),
            action="reject",
            intro="A rejected answer leaves every decision, Table 2, the leaderboard and later snapshots, and its "
                  "task goes back to the queue for a different worker. On a platform the work is rejected there too.")
        if response:
            return response
        self._review(request, list(queryset), accept=False, reason=form.cleaned_data["reason"],
                     stop_workers=form.cleaned_data.get("stop_workers", False))
        return None

    def _review(self, request, answers, *, accept, reason, stop_workers=False):
        review_answers(request, answers, accept=accept, reason=reason, stop_workers=stop_workers)


def review_answers(request, answers, *, accept, reason, stop_workers=False):
    """Accept or reject answers through the review services, then on their platforms, and tell the
    reviewer what each did: the one way the admin reviews, from the answers list or a worker's page.
    `stop_workers`: after rejecting, block the answers' workers (mturk.services.reviewing.stop_workers)."""
    try:
        outcome = review.review_work(assignments=answers, accept=accept, reviewer=request.user, reason=reason)
    except AnnotationError as error:
        messages.error(request, str(error))
        return False
    messages.success(request, outcome.message("accepted" if accept else "rejected"))
    for line in outcome.followed:
        messages.info(request, line)
    if stop_workers and not accept:
        stop_workers_and_say(request, {answer.worker for answer in answers}, reason=reason)
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
        # A rejected vote, or a provisional one its stage does not count, makes no disagreement.
        votes = Verification.objects.filter(counted_verifications(), reference=OuterRef("pk"))
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
adjudicate_action.allowed_permissions = ("change",)


def page_votes(references):
    """Set `correct_votes` and `incorrect_votes` on each of these references (one query), for
    `votes_summary`: the votes that count (counted_verifications), the ones that decide."""
    rows = (Verification.objects.filter(counted_verifications(), reference__in=references)
            .order_by().values("reference")
            .annotate(correct=Count("pk", filter=Q(is_correct=True)),
                      incorrect=Count("pk", filter=Q(is_correct=False))))
    votes = {row["reference"]: (row["correct"], row["incorrect"]) for row in rows}
    for reference in references:
        reference.correct_votes, reference.incorrect_votes = votes.get(reference.pk, (0, 0))


def votes_summary(reference):
    return f"{reference.correct_votes} correct, {reference.incorrect_votes} incorrect"
