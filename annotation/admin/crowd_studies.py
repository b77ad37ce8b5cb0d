"""Crowd studies and their HITs in the admin: publishing, syncing, planning pay, expiring HITs."""

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from annotation.admin.actions import each_selected
from annotation.admin.audit import AuditTrailMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.platform_actions import PayPermissionMixin, form_step
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.models import Worker, WorkerQualification
from annotation.public_urls import placeholder_warning
from crowdbench import shared_cache
from mturk import client as mturk_client
from mturk import selectors
from mturk.exceptions import PlatformError
from mturk.links import completion_redirect, study_link
from mturk.models import CrowdStudy, Hit, Submission
from mturk.platforms import backend_class, backend_classes
from mturk.selectors import study_figures
from mturk.services import access, publishing, reviewing, syncing

# A study's links are made from its platform and its row: the add form has neither yet, and its
# platform's name was missing from what the page said instead ("studies have no study link").
_SHOWN_ONCE_SAVED = "Shown once the study is saved."


class PublishForm(forms.Form):
    tasks = forms.IntegerField(min_value=1, max_value=10_000, initial=10,
                               help_text="MTurk: HITs (one per work unit). Others: places.")
    without_open_work = forms.BooleanField(
        required=False, label="Publish even though no work is ready",
        help_text="Places of a study with no open units ready (its stage not launched, or nothing open "
                  "left) are refused unless this is ticked: every participant who arrives would get no work.")


# "Who may work" on a platform that screens participants on its own site.
PLATFORM_SCREENING = ("A stage with a qualification test gives its tasks only to workers who passed it; "
                      "in-house annotators, trained in person, skip it. Who may take part (countries, "
                      "approval rate, past studies) is set in the platform's own screening. Auto-approval "
                      "states the platform's own delay, so that answers are reviewed before it.")


@admin.register(CrowdStudy)
class CrowdStudyAdmin(GroupScopedAdminMixin, AuditTrailMixin, PayPermissionMixin, admin.ModelAdmin):
    list_display = ["name", "platform", "stage", "family", "reward_usd", "budget_usd", "spend",
                    "submission_count", "hit_count", "ready", "flagged"]
    list_filter = ["platform", "stage"]
    readonly_fields = ["hit_type_id", "hit_type_environment", "link", "completion", "figures", "pay_plan"]
    actions = ["publish_batch", "sync", "plan_pay", "expire_hits", "connect_payments_csv"]
    fieldsets = [
        (None, {"fields": ["platform", "stage", "family", "name", "external_id", "completion_code"]}),
        ("Pay", {"fields": ["reward_usd", "target_hourly_wage_usd", "estimated_seconds", "budget_usd",
                            "places_published", "figures", "pay_plan"]}),
        ("What workers see", {"fields": ["title", "description", "keywords", "assignment_duration_minutes",
                                         "lifetime_hours", "frame_height"]}),
        ("Who may work", {
            "fields": ["requires_stage_qualification", "worker_countries", "min_approval_rate",
                       "min_approved_hits", "auto_approval_days"],
            "description": "Countries, approval rate and approved HITs become MTurk qualification "
                           "requirements, and so does the stage's qualification test when "
                           "'requires stage qualification' is ticked, so that MTurk shows the HITs "
                           "only to workers who passed it. Whatever that box says, a stage with a "
                           "test gives its tasks on every platform only to workers who passed it; "
                           "in-house annotators, trained in person, skip it. On Prolific and "
                           "CloudResearch Connect set the rest in the platform's own screening; it "
                           "starts empty here. Auto-approval starts at the platform's own delay "
                           "(Prolific 21 days, Connect 14).",
        }),
        ("Links and platform ids", {"fields": ["link", "completion", "hit_type_id", "hit_type_environment"]}),
    ]

    def get_fieldsets(self, request, obj=None):
        """The fields every study has, and the platform's own (a HIT's title and requirements on
        MTurk): a Prolific study's form asked for MTurk's approved HITs and frame height."""
        chosen = obj.platform if obj is not None else request.POST.get("platform") or request.GET.get("platform")
        backends = backend_classes()
        own = set(backends[chosen].study_fields) if chosen in backends else set()
        others = {field for backend in backends.values() for field in backend.study_fields} - own
        shown = []
        for name, options in super().get_fieldsets(request, obj):
            fields = [field for field in options["fields"] if field not in others]
            if fields:
                if others and name == "Who may work":
                    options = {**options, "description": PLATFORM_SCREENING}
                shown.append((name, {**options, "fields": fields}))
        return shown

    def save_model(self, request, obj, form, change):
        # A field the form leaves out (another platform's) takes the platform's default, not the
        # model's, which are MTurk's.
        if not change and obj.platform in backend_classes():
            for field, value in backend_classes()[obj.platform].study_defaults.items():
                if field not in form.fields:
                    setattr(obj, field, value)
        super().save_model(request, obj, form, change)

    def add_view(self, request, form_url="", extra_context=None):
        # Each platform starts with its own defaults, so the platform is chosen first.
        if request.method == "GET" and request.GET.get("platform") not in backend_classes():
            return TemplateResponse(request, "admin/mturk/crowdstudy/choose_platform.html", {
                **self.admin_site.each_context(request), "opts": self.opts,
                "title": "Which platform is this study on?",
                "platforms": [(Worker.Platform(platform).label,
                               f"{reverse('admin:mturk_crowdstudy_add')}?platform={platform}")
                              for platform in backend_classes()],
            })
        return super().add_view(request, form_url, extra_context)

    def get_changeform_initial_data(self, request):
        initial = super().get_changeform_initial_data(request)
        platform = initial.get("platform")
        defaults = backend_classes()[platform].study_defaults if platform in backend_classes() else {}
        for field, value in defaults.items():
            initial.setdefault(field, value)
        return initial

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            n_hits=Count("hits", distinct=True),
            n_ready=Count("submissions", filter=Q(submissions__review=Submission.Review.READY),
                          distinct=True),
            n_flagged=Count("submissions", filter=Q(submissions__review=Submission.Review.FLAGGED),
                            distinct=True),
        )

    @admin.display(description="HITs")
    def hit_count(self, study):
        return study.n_hits

    @admin.display(description="ready")
    def ready(self, study):
        return study.n_ready

    @admin.display(description="flagged")
    def flagged(self, study):
        return study.n_flagged

    def _figures(self, study):
        # Both columns of a row, and the page, render one computation (mturk.selectors).
        if getattr(study, "shown_figures", None) is None:
            study.shown_figures = study_figures(study)
        return study.shown_figures

    @admin.display(description="committed spend")
    def spend(self, study):
        return f"${self._figures(study).committed:.2f}"

    @admin.display(description="submissions")
    def submission_count(self, study):
        figures = self._figures(study)
        return figures.submissions if figures.source != "not synced" else f"{figures.submissions} (not yet synced)"

    @admin.display(description="submissions and spend")
    def figures(self, study):
        if not study.pk:
            return "-"
        return self._figures(study).summary

    def get_object(self, request, object_id, from_field=None):
        study = super().get_object(request, object_id, from_field)
        if study is not None:
            # The study link is shown on the address the researcher is using when
            # PUBLIC_BASE_URL is unset; a display method sees only the object.
            study.shown_to = request
        return study

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if request.method == "GET":
            if warning := placeholder_warning("this study's link and HITs"):
                self.message_user(request, warning, messages.WARNING)
            study = self.get_object(request, object_id)
            if study is not None and (notice := access.credentials_notice(study.platform)):
                self.message_user(request, notice, messages.WARNING)
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description="study link")
    def link(self, study):
        if not study.pk:
            return _SHOWN_ONCE_SAVED
        try:
            return study_link(study, request=getattr(study, "shown_to", None))
        except PlatformError as error:
            return str(error)

    @admin.display(description="completion redirect")
    def completion(self, study):
        if not study.pk:
            return _SHOWN_ONCE_SAVED
        try:
            return completion_redirect(study)
        except PlatformError as error:
            return str(error)

    @admin.display(description="pay plan (per 100 tasks)")
    def pay_plan(self, study):
        if not study.pk:
            return "-"
        try:
            plan = selectors.plan_for_study(study, tasks=100)
        except PlatformError as error:
            return str(error)
        return format_html("<pre>{}</pre>", "\n".join(plan.lines()))

    def changelist_view(self, request, extra_context=None):
        banner = {"environment": mturk_client.environment(), "endpoint": mturk_client.endpoint_url(),
                  "balance": "", "balance_error": ""}
        # Asked at most once a minute: every visit to this list would otherwise call MTurk.
        key = f"mturk-balance:{banner['endpoint']}"
        banner["balance"] = shared_cache.get(key, "")
        if not mturk_client.credentials_found():
            banner["balance_error"] = "not asked: no MTurk credentials were found"
        elif not banner["balance"]:
            try:
                banner["balance"] = mturk_client.account_balance()
                shared_cache.set(key, banner["balance"], 60)
            except PlatformError as error:
                banner["balance_error"] = f"unavailable ({error})"
        if request.method == "GET":
            platforms = CrowdStudy.objects.values_list("platform", flat=True).distinct()
            for platform in sorted(platforms):
                if notice := access.credentials_notice(platform):
                    self.message_user(request, notice, messages.WARNING)
        # A state shown with the page, not a message: a message added here was stored as well
        # whenever the list answered with a redirect (after every action), and shown twice.
        paused = WorkerQualification.objects.filter(status=WorkerQualification.Status.PAUSED).count()
        return super().changelist_view(request, {**(extra_context or {}), "mturk": banner,
                                                 "paused_workers": paused})

    @admin.action(description="Publish a batch", permissions=["pay"])
    def publish_batch(self, request, queryset):
        platforms = sorted({study.platform for study in queryset})
        ready = []
        for study in queryset:
            work = publishing.open_work(study)
            ready.append(f"“{study.name}”: {work.shortfall() or f'{work.units} open unit(s) ready'}.")
        form, response = form_step(self, request, queryset, form_class=PublishForm,
                                    title="Publish a batch", submit_label="Publish",
                                    action="publish_batch",
                                    intro=" ".join(filter(None, [*map(access.publish_notice, platforms), *ready])))
        if response:
            if warning := placeholder_warning("the HITs and study links of this batch"):
                self.message_user(request, warning, messages.WARNING)
            return response
        tasks, anyway = form.cleaned_data["tasks"], form.cleaned_data["without_open_work"]
        batches = each_selected(self, request, queryset, lambda study: publishing.publish_batch(
            study=study, tasks=tasks, actor=request.user, without_open_work=anyway))
        for study, publication in batches:
            self.message_user(request, f"{study}: {publication.message}",
                              messages.SUCCESS if publication.sent else messages.WARNING)
        return None

    @admin.action(description="Sync submitted work now", permissions=["change"])
    def sync(self, request, queryset):
        for study, counts in each_selected(self, request, queryset,
                                           lambda study: syncing.sync_study(study=study,
                                                                            actor=request.user)):
            summary = ", ".join(f"{n} {review}" for review, n in sorted(counts.items())) or "nothing new"
            self.message_user(request, f"{study}: synced ({summary}).", messages.SUCCESS)

    @admin.action(description="Plan pay and set the reward from the target wage", permissions=["pay"])
    def plan_pay(self, request, queryset):
        plans = each_selected(self, request, queryset, lambda study: publishing.set_reward_from_plan(
            study=study, actor=request.user))
        for study, plan in plans:
            self.message_user(request, f"{study}: reward set to ${plan.reward} "
                                       f"({plan.seconds_per_task:.0f} s, {plan.time_source}).")

    @admin.action(description="Expire open HITs", permissions=["pay"])
    def expire_hits(self, request, queryset):
        expired = each_selected(self, request, queryset,
                                lambda study: reviewing.expire_hits(study=study, actor=request.user))
        for study, hits in expired:
            self.message_user(request, f"{study}: MTurk expired {len(hits)} HIT(s).")


    @admin.action(description="Download the approvals and bonuses for Connect's dashboard (CSV)",
                  permissions=["pay"])
    def connect_payments_csv(self, request, queryset):
        # Connect pays approvals and bonuses uploaded on its dashboard; the file holds participant
        # ids, so it is for that upload only, and one study's file at a time.
        studies = list(queryset)
        content = backend_class(studies[0].platform)().payments_csv(studies[0]) if len(studies) == 1 else None
        if content is None:
            self.message_user(request, "Select one CloudResearch Connect study to download its payments file.",
                              messages.ERROR)
            return None
        study = studies[0]
        response = HttpResponse(content, content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="connect-payments-study-{study.pk}.csv"'
        response["Cache-Control"] = "private, no-store"
        return response


# --- HITs ----------------------------------------------------------------------------------------


class ExtendForm(forms.Form):
    more = forms.IntegerField(min_value=1, max_value=100, label="Add assignments")


@admin.register(Hit)
class HitAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, PayPermissionMixin, admin.ModelAdmin):
    list_display = ["hit_id", "study", "unit", "environment", "max_assignments", "reward_usd",
                    "status", "expires_at", "last_synced_at"]
    list_filter = ["status", "environment", "study"]
    search_fields = ["hit_id"]
    readonly_fields = [f.name for f in Hit._meta.fields]
    actions = ["extend"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Add assignments to HITs", permissions=["pay"])
    def extend(self, request, queryset):
        form, response = form_step(
            self, request, queryset, form_class=ExtendForm, title="Add assignments",
            submit_label="Add", action="extend",
            intro="A HIT made with fewer than 10 assignments cannot grow to 10 or more.")
        if response:
            return response
        more = form.cleaned_data["more"]
        each_selected(self, request, queryset,
                      lambda hit: reviewing.extend_hit(hit=hit, more=more, actor=request.user))
