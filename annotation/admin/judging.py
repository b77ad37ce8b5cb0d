"""The researchers' side of the LLM judge (paper §4.2): judge runs, their verdicts and their calls."""

from django import forms
from django.contrib import admin

from annotation import teams
from annotation.admin.actions import each_selected
from annotation.admin.audit import AuditTrailMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.admin.worker_check import say_if_jobs_will_wait
from annotation.exceptions import AnnotationError
from annotation.judging.runner import check_judge_run, create_judge_run, run_again
from annotation.models import CHIRP_CRITERIA, JudgeCall, JudgeJudgement, JudgeRun
from crowdbench.jobs import enqueue


class NewJudgeRunForm(forms.ModelForm):
    """A judge run with a model of the researcher's choosing (the tournament list's actions use
    JUDGE_MODEL), beside the tournament's other runs."""

    class Meta:
        model = JudgeRun
        fields = ["tournament", "engine", "mode", "concurrency", "use_batch_api"]

    def clean(self):
        data = super().clean()
        if data.get("tournament") and data.get("mode") and data.get("engine"):
            try:
                check_judge_run(tournament=data["tournament"], mode=data["mode"], engine=data["engine"])
            except AnnotationError as error:
                raise forms.ValidationError(str(error)) from error
        return data


@admin.register(JudgeRun)
class JudgeRunAdmin(GroupScopedAdminMixin, AuditTrailMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "tournament",
        "engine",
        "mode",
        "status",
        "progress",
        "cached_calls",
        "fallback_calls",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "started_at",
        "finished_at",
    ]
    list_filter = ["status", "mode", "engine"]
    readonly_fields = [
        "status",
        "total_calls",
        "done_calls",
        "cached_calls",
        "fallback_calls",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "batch_ids",
        "error",
        "base_url_label",
        "prompts_sha256",
        "created_at",
        "started_at",
        "finished_at",
    ]
    actions = ["rerun"]

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = NewJudgeRunForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return NewJudgeRunForm.Meta.fields if obj is None else super().get_fields(request, obj)

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else self.readonly_fields

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        run = create_judge_run(tournament=obj.tournament, mode=obj.mode, engine=obj.engine,
                               concurrency=obj.concurrency, use_batch_api=obj.use_batch_api)
        obj.pk, obj.prompts_sha256, obj.base_url_label = run.pk, run.prompts_sha256, run.base_url_label
        obj._state.adding = False
        enqueue("tasks.run_judge", run.pk)

    @admin.display(description="done / total")
    def progress(self, run):
        return run.progress

    @admin.action(description="Run again (cached answers cost nothing)", permissions=["change"])
    def rerun(self, request, queryset):
        queued = len(each_selected(self, request, queryset, lambda run: run_again(run=run)))
        if queued:
            self.message_user(request, f"{queued} judge run(s) queued.")
            say_if_jobs_will_wait(self, request)


class JudgeRunListFilter(admin.RelatedFieldListFilter):
    """The runs the researcher may see, each named with its tournament in the one query: Django's
    own filter names each run with a query of its own."""

    def field_choices(self, field, request, model_admin):
        runs = teams.visible(JudgeRun.objects.select_related("tournament"), request.user, via="tournament__group")
        return [(run.pk, str(run)) for run in runs.order_by("-pk")]


class CriterionListFilter(admin.SimpleListFilter):
    """CHIRP's criteria, the only ones a judge is asked: no SELECT DISTINCT over every verdict."""

    title = "criterion"
    parameter_name = "criterion"

    def lookups(self, request, model_admin):
        return [(criterion, criterion.replace("_", " ")) for criterion in CHIRP_CRITERIA]

    def queryset(self, request, queryset):
        return queryset.filter(criterion=self.value()) if self.value() else queryset


@admin.register(JudgeJudgement)
class JudgeJudgementAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "run",
        "battle",
        "ordering",
        "criterion",
        "winner",
        "used_fallback",
        "refused",
        "score_a",
        "score_b",
    ]
    list_filter = [("run", JudgeRunListFilter), "winner", "used_fallback", "refused", CriterionListFilter]
    list_select_related = ["run__tournament", "battle__response_a", "battle__response_b"]
    raw_id_fields = ["run", "battle", "call", "fallback_call", "call_b"]


@admin.register(JudgeCall)
class JudgeCallAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    list_display = [
        "request_sha256",
        "prompt_tokens",
        "completion_tokens",
        "via_batch",
        "created_at",
    ]
    list_filter = ["via_batch"]
    search_fields = ["request_sha256"]
    readonly_fields = [
        "request_sha256",
        "request",
        "response",
        "prompt_tokens",
        "completion_tokens",
        "via_batch",
        "created_at",
    ]
