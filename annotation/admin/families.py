"""Instruction families and their stages in the admin: seed images, skill tags, launching a stage,
the published sheets to import and the family's own sheet to export."""

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, Count, ExpressionWrapper, Max, Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import content_disposition_header
from django.utils.safestring import mark_safe
from django.utils.text import slugify

from annotation import teams
from annotation.admin.audit import AuditTrailMixin
from annotation.admin.family_workflow import family_workflow
from annotation.admin.images import thumbnail_html
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.admin.worker_check import say_if_jobs_will_wait
from annotation.admin.worker_model_choice import WorkerModelChoiceMixin, warn_of_slow_fits
from annotation.admin.workflow import WorkflowAdminMixin, perform_family_action
from annotation.collection import progress
from annotation.collection.uploads import store_uploaded_image
from annotation.collection.verification import WORKER_MODEL_JOB
from annotation.collection.waiting import settle_family
from annotation.crowdwork import configs, stages
from annotation.datasets import exports, formats, imports, layouts
from annotation.exceptions import AnnotationError
from annotation.models import (
    ImageAsset,
    Instance,
    InstructionFamily,
    ResearchGroup,
    SeedImage,
    Stage,
    StageConfig,
    multi_image_q,
)
from annotation.models.benchmark import benchmark_instances
from crowdbench.jobs import enqueue


def _report_errors(modeladmin, request, action):
    try:
        return action()
    except AnnotationError as error:
        modeladmin.message_user(request, str(error), messages.ERROR)
        return None


class SeedImageForm(forms.ModelForm):
    """A seed image: upload one here, or pick one already stored."""

    upload = forms.FileField(required=False, label="Upload an image",
                             help_text="JPEG, PNG, WebP or GIF; checked before it is stored.")
    licence = forms.CharField(required=False, max_length=200, help_text="e.g. CC BY 2.0, CC0, public domain")
    licence_url = forms.URLField(required=False, max_length=500)
    author = forms.CharField(required=False, max_length=300)
    source_url = forms.URLField(required=False, max_length=1000,
                                help_text="The page the image was found on (e.g. Openverse).")

    class Meta:
        model = SeedImage
        fields = ["upload", "licence", "licence_url", "author", "source_url", "image"]
        labels = {"image": "Or a stored image"}

    IMAGE_METADATA = ("licence", "licence_url", "author", "source_url")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["image"].required = False
        if self.instance.pk:
            # A stored seed image's licence is shown (and corrected) here, beside its thumbnail.
            for name in self.IMAGE_METADATA:
                self.initial.setdefault(name, getattr(self.instance.image, name))

    def save(self, commit=True):
        seed = super().save(commit)
        if self.instance.pk and not self.cleaned_data.get("upload") and self.has_changed():
            metadata = {name: self.cleaned_data.get(name) or "" for name in self.IMAGE_METADATA}
            ImageAsset.objects.filter(pk=seed.image_id).update(**metadata)
        return seed

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("upload")
        if upload and not self.errors:
            # The admin saves the family, its inlines and this image in one transaction.
            try:
                cleaned["image"] = store_uploaded_image(
                    upload=upload, **{name: cleaned.get(name) or "" for name in self.IMAGE_METADATA})
            except AnnotationError as error:
                self.add_error("upload", str(error))
        elif not cleaned.get("image") and not cleaned.get("DELETE"):
            raise forms.ValidationError("Upload an image, or choose one already stored.")
        return cleaned


class SeedImageInline(admin.StackedInline):
    model = SeedImage
    form = SeedImageForm
    extra = 1
    raw_id_fields = ["image"]
    readonly_fields = ["preview"]
    fields = ["preview", "upload", "licence", "licence_url", "author", "source_url", "image"]
    verbose_name = "seed image"

    @admin.display(description="image")
    def preview(self, seed):
        return thumbnail_html(seed.image if seed.pk else None)


class SkillTagsField(forms.CharField):
    """Skill tags typed as a comma-separated list (stored as a JSON list, as the sheets carry them)."""

    MAX_TAG_CHARS = 60

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "Comma-separated, e.g. recognition, reasoning, counting.")
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, list | tuple):
            return ", ".join(str(tag) for tag in value)
        return value

    def to_python(self, value):
        if isinstance(value, str) and value.strip().startswith("["):
            # A JSON list typed from habit (the field used to take JSON) means the same tags.
            try:
                parsed = json.loads(value)
            except ValueError:
                raise forms.ValidationError("Type the tags separated by commas, e.g. recognition, "
                                            "reasoning (not JSON).") from None
            value = parsed if isinstance(parsed, list) else value
        if isinstance(value, list | tuple):
            value = ",".join(str(tag) for tag in value)
        tags = []
        for tag in (value or "").split(","):
            tag = " ".join(tag.split())
            if not tag:
                continue
            if len(tag) > self.MAX_TAG_CHARS or not tag.isprintable():
                raise forms.ValidationError(
                    f"“{tag[:self.MAX_TAG_CHARS]}…” is not a skill tag: a tag is at most "
                    f"{self.MAX_TAG_CHARS} printable characters." if len(tag) > self.MAX_TAG_CHARS
                    else "A skill tag cannot contain control characters.")
            if tag.lower() not in (seen.lower() for seen in tags):
                tags.append(tag)
        return tags


class InstructionFamilyForm(forms.ModelForm):
    skill_tags = SkillTagsField(required=False, max_length=2000,
                                widget=forms.TextInput(attrs={"class": "vLargeTextField", "size": 80}))

    class Meta:
        model = InstructionFamily
        fields = ["name", "group", "description", "skill_tags", "is_multi_image", "target_instances", "source",
                  "source_dataset", "citation", "seed_instruction", "seed_response"]


# A stage's settings in groups, on a family's page and on its own: sixteen settings in one table
# row made the family's page several screens wide.
# Groups only verification reads are shown for a verification stage alone (stage_settings.js).
STAGE_SETTINGS = [(None, {"fields": [("stage", "launched_at"), ("overlap", "lease_minutes"), "counts_provisional"]}),
                  ("Ask until decided", {"classes": ["for-stage-verification"], "fields": [
                      "adaptive", ("agree_to_decide", "stopping"), ("posterior_threshold", "prior_accuracy")]}),
                  ("Deciding a verification", {"classes": ["for-stage-verification"], "fields": [(
                      "verification_rule", "aggregation"), ("model_min_answers", "model_min_posterior"),
                      ("on_incorrect", "max_caption_rounds")]})]


class StageConfigInline(WorkerModelChoiceMixin, admin.StackedInline):
    model = StageConfig
    extra = 0
    fieldsets = STAGE_SETTINGS
    readonly_fields = ["launched_at"]


def _launch_action(stage):
    def action(modeladmin, request, queryset):
        launched = False
        for family in queryset:
            config = _report_errors(modeladmin, request,
                                    lambda family=family: stages.launch_stage(family=family, stage=stage))
            if config:
                launched = True
                modeladmin.message_user(
                    request, f"{Stage(stage).label} launched for “{family.name}”; its work units are being created."
                )
        if launched:
            say_if_jobs_will_wait(modeladmin, request)

    action.__name__ = f"launch_{stage}"
    action.short_description, action.allowed_permissions = f"Launch {Stage(stage).label.lower()}", ("change",)
    return action


# Pairwise preference is launched per tournament (its battles), never per family.
FAMILY_STAGES = [stage for stage in Stage.values if stage != Stage.PAIRWISE]


class VisitBenchImportForm(forms.Form):
    sheet = forms.FileField(help_text="visit_bench_multi_images.csv, the single-image sheet, or the "
                                      "fully annotated example.")
    group = forms.ModelChoiceField(queryset=ResearchGroup.objects.none(), required=False,
                                   help_text="The research group that owns the families the sheet makes.")

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        # The groups this user makes rows in; a member must choose one, a superuser may choose none.
        self.fields["group"].queryset = teams.groups_to_own(user)
        self.fields["group"].required = teams.is_member(user) and not user.is_superuser
        if not self.fields["group"].queryset.exists():
            del self.fields["group"]

    def clean_group(self):
        try:
            return teams.owning_group(user=self.user, group=self.cleaned_data.get("group"))
        except AnnotationError as error:
            raise forms.ValidationError(str(error)) from None


SHEET_KINDS = (layouts.SINGLE_IMAGE, layouts.MULTI_IMAGE)


def family_sheets(user):
    """[{family_id, family, kind, kind_name, rows}] for every family `user` may see and kind of
    sheet that its benchmark instances fill, by family name."""
    counts = (teams.visible(benchmark_instances(), user, via="family__group").order_by()
              .annotate(multi=ExpressionWrapper(multi_image_q(), output_field=BooleanField()))
              .values("family_id", "family__name", "multi").annotate(rows=Count("pk"))
              .order_by("family__name", "family_id", "multi"))
    sheets = []
    for row in counts:
        kind = layouts.MULTI_IMAGE if row["multi"] else layouts.SINGLE_IMAGE
        sheets.append({"family_id": row["family_id"], "family": row["family__name"], "kind": kind,
                       "kind_name": layouts.KIND_NAMES[kind], "rows": row["rows"]})
    return sheets


@admin.register(InstructionFamily)
class InstructionFamilyAdmin(GroupScopedAdminMixin, AuditTrailMixin, WorkflowAdminMixin, admin.ModelAdmin):
    form = InstructionFamilyForm
    change_list_template = "admin/annotation/instructionfamily/change_list.html"
    change_form_template = "admin/annotation/workflow_change_form.html"
    list_display = ["name", "workflow_link", "source", "is_multi_image", "target_instances", "instance_count",
                    "verified_count", "discarded_count"]
    list_filter = ["source", "is_multi_image"]
    search_fields = ["name", "description", "source_dataset"]
    inlines = [SeedImageInline, StageConfigInline]
    readonly_fields = ["progress"]
    fieldsets = [
        (None, {"fields": ["name", "group", "description", "skill_tags", "is_multi_image", "target_instances"]}),
        ("Source", {"fields": ["source", "source_dataset", "citation"]}),
        ("Seed example", {"fields": ["seed_instruction", "seed_response"]}),
        ("Progress", {"fields": ["progress"]}),
    ]
    actions = [_launch_action(stage) for stage in FAMILY_STAGES]

    def build_workflow(self, family):
        return family_workflow(family)

    def perform_next_action(self, request, family, key):
        return perform_family_action(family=family, key=key)

    @admin.display(description="workflow")
    def workflow_link(self, family):
        return format_html('<a href="{}">Workflow</a>',
                           reverse("admin:annotation_instructionfamily_workflow", args=[family.pk]))

    def response_add(self, request, obj, post_url_continue=None):
        # A new family's next step is on its workflow page, not in the list of families.
        if "_continue" in request.POST or "_addanother" in request.POST or "_popup" in request.POST:
            return super().response_add(request, obj, post_url_continue)
        self.message_user(request, f"The family “{obj.name}” was added. Its steps are below.", messages.SUCCESS)
        return redirect("admin:annotation_instructionfamily_workflow", obj.pk)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        if change and "target_instances" in form.changed_data:
            # A changed target reaches the work at once: a raised one makes its instruction tasks, a
            # lowered one closes the tasks nobody holds beyond it.
            family = form.instance
            closed = stages.trim_open_slots(family=family)
            settled = settle_family(family)
            said = settled.message() or ("no new task needed" if not closed else "")
            if closed:
                said = "; ".join(filter(None, [said, f"{closed} open task(s) nobody held closed"]))
            self.message_user(request, f"Target {family.target_instances}: {said}.", messages.INFO)

    def save_formset(self, request, form, formset, change):
        if formset.model is StageConfig:
            return _save_and_apply_stage_configs(self, request, formset)
        if formset.model is not SeedImage:
            return super().save_formset(request, form, formset, change)
        # Seed images keep the order they were added in; nobody types positions.
        seeds = formset.save(commit=False)
        for seed in formset.deleted_objects:
            seed.delete()
        taken = SeedImage.objects.filter(family=form.instance).aggregate(top=Max("position"))["top"]
        position = -1 if taken is None else taken
        for seed in seeds:
            if seed.pk is None:
                position += 1
                seed.position = position
            seed.save()
        formset.save_m2m()
        return None

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            n_instances=Count("instances", distinct=True),
            n_verified=Count("instances", filter=Q(instances__status=Instance.Status.VERIFIED), distinct=True),
            n_discarded=Count("instances", filter=Q(instances__status=Instance.Status.DISCARDED), distinct=True),
        )

    @admin.display(description="instances", ordering="n_instances")
    def instance_count(self, family):
        return family.n_instances

    @admin.display(description="verified", ordering="n_verified")
    def verified_count(self, family):
        return family.n_verified

    @admin.display(description="discarded", ordering="n_discarded")
    def discarded_count(self, family):
        return family.n_discarded

    @admin.display(description="per stage")
    def progress(self, family):
        if not family.pk:
            return "-"
        rows = progress.stage_progress(family)
        header = mark_safe("<tr><th>stage</th><th>launched</th><th>waiting</th><th>leased</th>"
                           "<th>done</th><th>discarded</th></tr>")
        body = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((row["label"], "yes" if row["launched"] else "no", row["waiting"], row["leased"],
              row["done"], row["discarded"]) for row in rows),
        )
        return format_html("<table>{}{}</table>", header, body)

    def get_urls(self):
        return [
            path("<int:family_id>/sheet/<slug:kind>.csv", self.admin_site.admin_view(self.sheet_view),
                 name="annotation_instructionfamily_sheet"),
            path("import-visit-bench/", self.admin_site.admin_view(self.import_view),
                 name="annotation_instructionfamily_import"),
            path("table2/", self.admin_site.admin_view(self.table2_view),
                 name="annotation_instructionfamily_table2"),
        ] + super().get_urls()

    def sheet_view(self, request, family_id, kind):
        """The family's verified instances as a benchmark sheet: the file a researcher adds
        "<model> prediction" columns to before importing it as predictions.csv."""
        # Another group's family is, to this user, one that does not exist.
        family = get_object_or_404(teams.visible(InstructionFamily.objects.all(), request.user), pk=family_id)
        if kind not in SHEET_KINDS:
            raise Http404(f"There is no {kind} sheet; a family's sheet is {' or '.join(SHEET_KINDS)}.")
        if not self.has_view_permission(request, family):
            raise PermissionDenied
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = content_disposition_header(
            True, f"{slugify(family.name) or 'family'}-{family.pk}-{formats.SHEETS[kind].name}.csv")
        exports.export_sheet(kind=kind, csv_file=response,
                             instances=benchmark_instances().filter(family=family))
        return response

    def import_view(self, request):
        if not request.user.has_perm("annotation.add_instance"):
            self.message_user(request, "You may not import instances.", messages.ERROR)
            return redirect("admin:annotation_instructionfamily_changelist")
        form = VisitBenchImportForm(request.POST or None, request.FILES or None, user=request.user)
        if request.method == "POST" and form.is_valid():
            sheet = form.cleaned_data["sheet"]
            try:
                result = imports.import_visit_bench(path_or_file=sheet, group=form.cleaned_data.get("group"))
            except AnnotationError as error:
                form.add_error("sheet", str(error))
            else:
                self.message_user(request, f"Imported {sheet.name}: {result.summary()}")
                return redirect("admin:annotation_instructionfamily_changelist")
        context = {**self.admin_site.each_context(request), "form": form, "opts": self.model._meta,
                   "title": "Import a VisIT-Bench sheet"}
        return TemplateResponse(request, "admin/annotation/import_visit_bench.html", context)

    def table2_view(self, request):
        families = teams.visible(InstructionFamily.objects.all(), request.user)
        family = None
        if request.GET.get("family"):
            family = get_object_or_404(families, pk=request.GET["family"])
        # "All families" is all the families this user may see, never another group's.
        table = progress.table2(family=family, families=families)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": "Verification report (paper Table 2)",
                   "columns": [name for name, _ in table.columns()],
                   "rows": progress.table2_rows(table), "decided_by": table.decided_by_text,
                   "families": families, "family": family}
        return TemplateResponse(request, "admin/annotation/table2.html", context)


def _settings_before(config):
    old = StageConfig.objects.filter(pk=config.pk).values(*configs.APPLIED_FIELDS).first() if config.pk else None
    return old or {name: getattr(config, name) for name in configs.APPLIED_FIELDS}


def _apply_and_say(modeladmin, request, config, before):
    applied = configs.apply_stage_config(config=config, before=before)
    if any(before[name] != getattr(config, name) for name in configs.APPLIED_FIELDS):
        modeladmin.message_user(request, f"{config}: {applied.message()}", messages.INFO)


def _save_and_apply_stage_configs(modeladmin, request, formset):
    """A family's stage settings saved from its page reach the stage's open work at once."""
    before = {form.instance.pk: _settings_before(form.instance) for form in formset.forms if form.instance.pk}
    formset.save()
    for config, _ in formset.changed_objects:
        _apply_and_say(modeladmin, request, config, before[config.pk])
    warn_of_slow_fits(modeladmin, request, [*formset.new_objects, *(config for config, _ in formset.changed_objects)])


@admin.register(StageConfig)
class StageConfigAdmin(WorkerModelChoiceMixin, GroupScopedAdminMixin, AuditTrailMixin, admin.ModelAdmin):
    list_display = ["family", "stage", "overlap", "lease_minutes", "launched_at", "verification_rule",
                    "adaptive", "aggregation", "on_incorrect"]
    list_filter = ["stage", "verification_rule", "aggregation"]
    fieldsets = [("Family", {"fields": ["family"]}), *STAGE_SETTINGS]
    readonly_fields = ["launched_at"]
    actions = ["refit_worker_models"]

    @admin.action(description="Refit the worker models now (deciding the references waiting)", permissions=["change"])
    def refit_worker_models(self, request, queryset):
        enqueue(WORKER_MODEL_JOB)
        self.message_user(request, "The worker models are being refitted on every counted verification answer; "
                                   "references waiting for one are decided when it ends.")
        say_if_jobs_will_wait(self, request)

    def save_model(self, request, obj, form, change):
        before = _settings_before(obj)
        super().save_model(request, obj, form, change)
        if change:
            _apply_and_say(self, request, obj, before)
