"""The researchers' side of scoring (paper §4): responses, tournaments, battles and the crowd's judgements;
the LLM judge's runs are in judging.py."""

from django import forms
from django.contrib import admin, messages
from django.core.files.base import ContentFile
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from annotation.admin.actions import each_selected
from annotation.admin.audit import AuditTrailMixin
from annotation.admin.families import family_sheets
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.admin.tournament_workflow import tournament_workflow
from annotation.admin.worker_check import say_if_jobs_will_wait
from annotation.admin.workflow import WorkflowAdminMixin, perform_tournament_action
from annotation.crowdwork.stopping import battle_posterior_text, stated_accuracy_warning
from annotation.exceptions import AnnotationError
from annotation.judging.runner import create_judge_run
from annotation.models import (
    Battle,
    EndpointCall,
    HumanJudgement,
    JudgeRun,
    ModelEndpoint,
    ModelResponse,
    Rubric,
    Tournament,
)
from annotation.preferences import answers, predictions, tournaments
from crowdbench.jobs import enqueue

PENDING_PREDICTIONS = "pending_predictions"


class PredictionsImportForm(forms.Form):
    predictions = forms.FileField(help_text="predictions.csv, UTF-8.")
    model_name = forms.CharField(
        required=False, max_length=200, label="Model name (optional)",
        help_text="For a file with one prediction column: the model's name, whatever the column calls "
                  "it (two files whose columns both say “MiniGPT-4 prediction” can then sit side by side).")


@admin.register(ModelResponse)
class ModelResponseAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    list_display = ["id", "model_name", "instance", "imported_from", "created_at"]
    list_filter = ["model_name"]
    list_select_related = ["instance__family"]
    # By name or instance, from an index each: a search through every answer's text took seconds
    # at 400,000 answers.
    search_fields = ["=model_name"]
    search_help_text = "A model's name (whole, in any case), or an instance's number."
    raw_id_fields = ["instance"]
    change_list_template = "admin/annotation/modelresponse_changelist.html"

    def get_search_results(self, request, queryset, search_term):
        if search_term.strip().isdigit():
            return queryset.filter(instance_id=int(search_term)), False
        return super().get_search_results(request, queryset, search_term)

    def get_urls(self):
        return [
            path(
                "import-predictions/",
                self.admin_site.admin_view(self.import_view),
                name="annotation_modelresponse_import",
            ),
        ] + super().get_urls()

    def import_view(self, request):
        if not request.user.has_perm("annotation.add_modelresponse"):
            self.message_user(request, "You may not import predictions.", messages.ERROR)
            return redirect("admin:annotation_modelresponse_changelist")
        form = PredictionsImportForm(request.POST or None, request.FILES or None)
        good = 0
        if request.method == "POST" and "only_good" in request.POST:
            # The file the report was about, kept in the session: a file input cannot be refilled.
            pending = request.session.pop(PENDING_PREDICTIONS, None)
            if pending is None:
                self.message_user(request, "Please choose the file again.", messages.WARNING)
                return redirect("admin:annotation_modelresponse_import")
            upload = ContentFile(pending["data"].encode("utf-8"), name=pending["name"])
            try:
                result = predictions.import_predictions(path_or_file=upload, only_good=True,
                                                        model_name=pending.get("model_name", ""))
            except AnnotationError as error:
                form = PredictionsImportForm()
                form.add_error("predictions", str(error))
            else:
                self.message_user(request, result.summary())
                return redirect("admin:annotation_modelresponse_changelist")
        elif request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["predictions"]
            data = upload.read()
            model_name = form.cleaned_data["model_name"]
            try:
                result = predictions.import_predictions(
                    path_or_file=ContentFile(data, name=upload.name), model_name=model_name)
            except AnnotationError as error:
                form.add_error("predictions", str(error))
                good = getattr(error, "good", 0)
                if good:
                    request.session[PENDING_PREDICTIONS] = {
                        "name": upload.name, "data": data.decode("utf-8-sig"), "model_name": model_name}
            else:
                self.message_user(request, result.summary())
                return redirect("admin:annotation_modelresponse_changelist")
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "good": good,
            "sheets": family_sheets(request.user),
            "opts": self.model._meta,
            "title": "Import model predictions",
        }
        return TemplateResponse(request, "admin/annotation/import_predictions.html", context)


class RubricInline(admin.TabularInline):
    model = Rubric
    extra = 0
    raw_id_fields = ["family", "instance"]


class ModelEndpointInline(admin.StackedInline):
    """Models whose answers the platform asks for (annotation/preferences/answers.py); the key stays
    in the environment, named here."""

    model = ModelEndpoint
    extra = 0
    fields = ["model_name", ("base_url", "model"), "api_key_env", "parameters",
              ("input_price_per_million", "output_price_per_million"), "concurrency", "error"]
    readonly_fields = ["error"]
    verbose_name = "endpoint model"
    verbose_name_plural = "endpoint models (answers generated before the battles are sampled)"


def _judge_action(mode):
    def action(modeladmin, request, queryset):
        runs = each_selected(modeladmin, request, queryset,
                             lambda tournament: create_judge_run(tournament=tournament, mode=mode))
        for tournament, run in runs:
            enqueue("tasks.run_judge", run.pk)
            modeladmin.message_user(request, f"{tournament}: judge run #{run.pk} ({run.engine}) queued.")
        if runs:
            say_if_jobs_will_wait(modeladmin, request)

    action.__name__ = f"run_judge_{mode}"
    return admin.action(description=f"Run the LLM judge: {JudgeRun.Mode(mode).label}", permissions=["change"])(action)


@admin.register(Tournament)
class TournamentAdmin(GroupScopedAdminMixin, AuditTrailMixin, WorkflowAdminMixin, admin.ModelAdmin):
    change_form_template = "admin/annotation/workflow_change_form.html"
    list_display = [
        "name",
        "workflow_link",
        "sampling",
        "judgements_per_pair",
        "with_criteria",
        "with_rubric",
        "battle_total",
        "human_progress",
        "launched_at",
        "leaderboard_link",
    ]
    filter_horizontal = ["families"]
    inlines = [ModelEndpointInline, RubricInline]
    readonly_fields = ["launched_at", "created_at"]
    actions = ["generate_answers", "sample", "launch", *(_judge_action(mode) for mode in JudgeRun.Mode.values)]

    def get_queryset(self, request):
        return super().get_queryset(request).with_progress()

    def build_workflow(self, tournament):
        return tournament_workflow(tournament)

    def perform_next_action(self, request, tournament, key):
        return perform_tournament_action(tournament=tournament, key=key, user=request.user)

    @admin.display(description="workflow")
    def workflow_link(self, tournament):
        return format_html('<a href="{}">Workflow</a>',
                           reverse("admin:annotation_tournament_workflow", args=[tournament.pk]))

    def save_model(self, request, obj, form, change):
        asking = ("judgements_per_pair", "adaptive", "posterior_threshold", "judgement_accuracy")
        before = Tournament.objects.filter(pk=obj.pk).values_list(*asking).first()
        super().save_model(request, obj, form, change)
        if change and before is not None and before != tuple(getattr(obj, name) for name in asking):
            resized, done = tournaments.apply_judgements_per_pair(tournament=obj)
            asks = (f"up to {obj.judgements_per_pair} judgement(s), until {battle_posterior_text(obj)} passes "
                    f"{obj.posterior_threshold:.0%}" if obj.adaptive
                    else f"{obj.judgements_per_pair} judgement(s)")
            self.message_user(request, f"{obj}: {resized} open battle(s) now ask for a new number ({asks}); "
                                       f"{done} of them already had enough and are done.", messages.INFO)
        if warning := stated_accuracy_warning(obj):
            self.message_user(request, warning, messages.WARNING)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        tournament = form.instance
        # Battles are sampled once the families are saved (they decide which instances count),
        # and only while the tournament has none and is not launched.
        if tournament.launched_at or tournament.battles.exists():
            return
        try:
            count = tournaments.sample_battles(tournament=tournament)
        except AnnotationError as error:
            self.message_user(request, f"No battles were sampled yet: {error} The tournament's workflow "
                                       "page samples them when you are ready.", messages.WARNING)
        else:
            self.message_user(request, f"{count} battles sampled for “{tournament.name}”.", messages.SUCCESS)

    def response_add(self, request, obj, post_url_continue=None):
        if "_continue" in request.POST or "_addanother" in request.POST or "_popup" in request.POST:
            return super().response_add(request, obj, post_url_continue)
        self.message_user(request, f"The tournament “{obj.name}” was added. Its steps are below.",
                          messages.SUCCESS)
        return redirect("admin:annotation_tournament_workflow", obj.pk)

    @admin.display(description="battles", ordering="battle_total")
    def battle_total(self, tournament):
        return tournament.battle_total

    @admin.display(description="human judgements")
    def human_progress(self, tournament):
        return f"{tournament.human_total}/{tournament.battle_total * tournament.judgements_per_pair}"

    @admin.display(description="leaderboard")
    def leaderboard_link(self, tournament):
        return format_html(
            '<a href="{}">leaderboard</a>', reverse("dashboard:leaderboard", args=[tournament.pk])
        )

    @admin.action(description="Generate answers from the endpoint models (before the battles)", permissions=["change"])
    def generate_answers(self, request, queryset):
        started = each_selected(self, request, queryset,
                                lambda tournament: answers.start_generation(tournament=tournament))
        for tournament, endpoints in started:
            self.message_user(request, f"{tournament}: answers from {len(endpoints)} endpoint model(s) queued.")
        if started:
            say_if_jobs_will_wait(self, request)

    @admin.action(description="Sample battles (with the tournament's seed)", permissions=["change"])
    def sample(self, request, queryset):
        for tournament, count in each_selected(self, request, queryset,
                                               lambda tournament: tournaments.sample_battles(tournament=tournament)):
            self.message_user(request, f"{tournament}: {count} battles sampled.")

    @admin.action(description="Launch: put the battles in the crowd work queue", permissions=["change"])
    def launch(self, request, queryset):
        for tournament, _ in each_selected(self, request, queryset,
                                           lambda tournament: tournaments.launch_tournament(tournament=tournament)):
            self.message_user(request, f"{tournament}: launched.")


@admin.register(EndpointCall)
class EndpointCallAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    """Every paid call for an endpoint model's answer, with its outcome: what failed and why."""


    list_display = ["id", "endpoint", "instance", "status", "attempts", "prompt_tokens", "completion_tokens",
                    "cost_usd", "error", "answered_at"]
    list_filter = ["status", "endpoint"]
    list_select_related = ["endpoint", "instance__family"]
    raw_id_fields = ["instance"]
    readonly_fields = [field.name for field in EndpointCall._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(Battle)
class BattleAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    list_display = ["id", "tournament", "instance", "model_a", "model_b", "human_judgement_count"]
    list_filter = ["tournament"]
    list_select_related = ["tournament", "instance__family", "response_a", "response_b"]
    raw_id_fields = ["instance", "response_a", "response_b"]

    def get_queryset(self, request):
        # Counted per battle shown (a subquery), not grouped over every battle before the page is cut.
        judgements = HumanJudgement.objects.filter(battle=OuterRef("pk")).order_by().values("battle")
        return super().get_queryset(request).annotate(
            n_human=Coalesce(Subquery(judgements.annotate(n=Count("pk")).values("n"), output_field=IntegerField()), 0))

    @admin.display(description="model A", ordering="response_a__model_name")
    def model_a(self, battle):
        return battle.response_a.model_name

    @admin.display(description="model B", ordering="response_b__model_name")
    def model_b(self, battle):
        return battle.response_b.model_name

    @admin.display(description="human judgements", ordering="n_human")
    def human_judgement_count(self, battle):
        return battle.n_human


@admin.register(HumanJudgement)
class HumanJudgementAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "battle",
        "worker",
        "shown_left",
        "choice",
        "criteria",
        "rubric_scores",
        "active_seconds",
        "created_at",
    ]
    list_filter = ["tournament", "choice"]
    list_select_related = ["battle__response_a", "battle__response_b", "worker"]
    raw_id_fields = ["battle", "worker", "assignment"]
    readonly_fields = ["created_at"]
