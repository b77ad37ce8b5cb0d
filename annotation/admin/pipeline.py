"""The researchers' side: families, stages, progress, references, imports and the Table 2 report."""

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

from annotation import llm
from annotation.admin.worker_check import say_if_jobs_will_wait
from annotation.admin.workflow import WorkflowAdminMixin, family_workflow, perform_family_action
from annotation.collection import captions, progress, references, stages
from annotation.collection.uploads import store_uploaded_image
from annotation.datasets import exports, formats, imports, layouts, streams
from annotation.exceptions import AnnotationError
from annotation.image_urls import check_image_url
from annotation.models import (
    Assignment,
    Caption,
    ImageAsset,
    Instance,
    InstanceImage,
    InstructionFamily,
    Reference,
    SeedImage,
    Stage,
    StageConfig,
    Verification,
    Worker,
    WorkUnit,
    multi_image_q,
)


def _report_errors(modeladmin, request, action):
    try:
        return action()
    except AnnotationError as error:
        modeladmin.message_user(request, str(error), messages.ERROR)
        return None


# --- images --------------------------------------------------------------------------------------


class ImageAssetForm(forms.ModelForm):
    upload = forms.FileField(required=False, help_text="JPEG, PNG, WebP or GIF; checked before it is stored.")

    class Meta:
        model = ImageAsset
        fields = ["upload", "url", "licence", "licence_url", "author", "source_url"]

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("upload")
        if not self.instance.pk and not upload and not cleaned.get("url"):
            raise forms.ValidationError("Upload an image or give its URL.")
        if upload and not self.errors:
            # The admin's save runs in the same transaction, so a later failure rolls this back.
            try:
                self.stored_image = store_uploaded_image(
                    upload=upload, **{field: cleaned.get(field, "") for field in
                                      ("licence", "licence_url", "author", "source_url")},
                )
            except AnnotationError as error:
                self.add_error("upload", str(error))
        return cleaned

    def clean_url(self):
        url = self.cleaned_data["url"]
        if url:
            try:
                check_image_url(url)
            except AnnotationError as error:
                raise forms.ValidationError(str(error)) from None
        return url


def thumbnail_html(image):
    """A small preview linking to the full image; the alt text is the image's readable name."""
    if image is None:
        return "-"
    src = image.browser_url
    if not src:
        # A link off the image allow-list is shown as text: the admin's browser never fetches it.
        return image.url or "-"
    return format_html('<a href="{}"><img class="admin-thumbnail" src="{}" alt="{}"></a>', src, src, str(image))


@admin.register(ImageAsset)
class ImageAssetAdmin(admin.ModelAdmin):
    form = ImageAssetForm
    list_display = ["id", "thumbnail", "name", "licence", "author", "width", "height", "created_at"]
    list_display_links = ["id", "name"]
    search_fields = ["original_name", "url", "author", "licence", "sha256"]
    readonly_fields = ["thumbnail", "original_name", "width", "height", "sha256", "uploaded_by"]

    class Media:
        css = {"all": ["annotation/admin.css"]}

    @admin.display(description="image")
    def thumbnail(self, image):
        return thumbnail_html(image)

    @admin.display(description="name", ordering="original_name")
    def name(self, image):
        return str(image)

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        # A stored image is replaced by uploading a new one, not by editing this row's file.
        return [field for field in fields if field != "upload"] if obj else fields

    def save_model(self, request, obj, form, change):
        stored = getattr(form, "stored_image", None)
        if stored is not None:
            obj.pk, obj.file, obj.sha256 = stored.pk, stored.file, stored.sha256
            obj.created_at = stored.created_at
        super().save_model(request, obj, form, change)


# --- families and stages ---------------------------------------------------------------------------


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
        fields = ["name", "description", "skill_tags", "is_multi_image", "target_instances", "source",
                  "source_dataset", "citation", "seed_instruction", "seed_response"]


class StageConfigInline(admin.TabularInline):
    model = StageConfig
    extra = 0
    fields = ["stage", "overlap", "lease_minutes", "launched_at", "verification_rule",
              "on_incorrect", "max_caption_rounds"]
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
    action.short_description = f"Launch {Stage(stage).label.lower()}"
    return action


# Pairwise preference is launched per preference study (its battles), never per family.
FAMILY_STAGES = [stage for stage in Stage.values if stage != Stage.PAIRWISE]


class VisitBenchImportForm(forms.Form):
    sheet = forms.FileField(help_text="visit_bench_multi_images.csv, the single-image sheet, or the "
                                      "fully annotated example.")


SHEET_KINDS = (layouts.SINGLE_IMAGE, layouts.MULTI_IMAGE)


def family_sheets():
    """[{family_id, family, kind, kind_name, rows}] for every family and kind of sheet that its
    verified instances fill, by family name."""
    counts = (streams.published_instances().order_by()
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
class InstructionFamilyAdmin(WorkflowAdminMixin, admin.ModelAdmin):
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
        (None, {"fields": ["name", "description", "skill_tags", "is_multi_image", "target_instances"]}),
        ("Source", {"fields": ["source", "source_dataset", "citation"]}),
        ("Seed example", {"fields": ["seed_instruction", "seed_response"]}),
        ("Progress", {"fields": ["progress"]}),
    ]
    actions = [_launch_action(stage) for stage in FAMILY_STAGES]

    class Media:
        css = {"all": ["annotation/admin.css"]}

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

    def save_formset(self, request, form, formset, change):
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
        family = get_object_or_404(InstructionFamily, pk=family_id)
        if kind not in SHEET_KINDS:
            raise Http404(f"There is no {kind} sheet; a family's sheet is {' or '.join(SHEET_KINDS)}.")
        if not self.has_view_permission(request, family):
            raise PermissionDenied
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = content_disposition_header(
            True, f"{slugify(family.name) or 'family'}-{family.pk}-{formats.SHEETS[kind].name}.csv")
        exports.export_sheet(kind=kind, csv_file=response,
                             instances=streams.published_instances().filter(family=family))
        return response

    def import_view(self, request):
        if not request.user.has_perm("annotation.add_instance"):
            self.message_user(request, "You may not import instances.", messages.ERROR)
            return redirect("admin:annotation_instructionfamily_changelist")
        form = VisitBenchImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            sheet = form.cleaned_data["sheet"]
            try:
                result = imports.import_visit_bench(path_or_file=sheet)
            except AnnotationError as error:
                form.add_error("sheet", str(error))
            else:
                self.message_user(request, f"Imported {sheet.name}: {result.summary()}")
                return redirect("admin:annotation_instructionfamily_changelist")
        context = {**self.admin_site.each_context(request), "form": form, "opts": self.model._meta,
                   "title": "Import a VisIT-Bench sheet"}
        return TemplateResponse(request, "admin/annotation/import_visit_bench.html", context)

    def table2_view(self, request):
        family = None
        if request.GET.get("family"):
            family = get_object_or_404(InstructionFamily, pk=request.GET["family"])
        table = progress.table2(family=family)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": "Verification report (paper Table 2)",
                   "columns": [name for name, _ in table.columns()],
                   "rows": progress.table2_rows(table),
                   "families": InstructionFamily.objects.all(), "family": family}
        return TemplateResponse(request, "admin/annotation/table2.html", context)


@admin.register(StageConfig)
class StageConfigAdmin(admin.ModelAdmin):
    list_display = ["family", "stage", "overlap", "lease_minutes", "launched_at", "verification_rule",
                    "on_incorrect"]
    list_filter = ["stage", "verification_rule"]


# --- instances -------------------------------------------------------------------------------------


class InstanceImageInline(admin.TabularInline):
    model = InstanceImage
    extra = 0
    raw_id_fields = ["image"]
    fields = ["position", "image", "preview", "blip2_caption"]
    readonly_fields = ["preview"]

    @admin.display(description="preview")
    def preview(self, link):
        return thumbnail_html(link.image if link.pk else None)


class CaptionInline(admin.TabularInline):
    model = Caption
    extra = 0
    fields = ["round", "texts", "author", "created_at"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


class ReferenceInline(admin.TabularInline):
    model = Reference
    fk_name = "instance"
    extra = 0
    fields = ["source", "model", "text", "verdict", "problem_in_caption", "problem_in_response",
              "flagged_harmful", "cost_usd"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


class ManualReferenceForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 8, "cols": 90}),
                           help_text="The candidate reference; verifiers will judge it like a generated one.")


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    change_list_template = "admin/annotation/instance/change_list.html"
    change_form_template = "admin/annotation/instance/change_form.html"
    list_display = ["id", "family", "short_instruction", "status", "image_count", "author"]
    list_filter = ["status", "family__is_multi_image", "family"]
    search_fields = ["instruction", "family__name"]
    raw_id_fields = ["author", "current_caption"]
    readonly_fields = ["status", "created_at", "updated_at", "add_reference_link"]
    inlines = [InstanceImageInline, CaptionInline, ReferenceInline]
    actions = ["generate_references"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("family", "author").annotate(
            n_images=Count("instanceimage", distinct=True)
        )

    @admin.display(description="instruction")
    def short_instruction(self, instance):
        return instance.instruction if len(instance.instruction) < 90 else f"{instance.instruction[:87]}…"

    @admin.display(description="images", ordering="n_images")
    def image_count(self, instance):
        return instance.n_images

    @admin.display(description="reference by hand")
    def add_reference_link(self, instance):
        if instance.status not in (Instance.Status.AWAITING_REFERENCE, Instance.Status.AWAITING_VERIFICATION):
            return "-"
        url = reverse("admin:annotation_instance_add_reference", args=[instance.pk])
        return format_html('<a class="button" href="{}">Paste a reference</a>', url)

    class Media:
        css = {"all": ["annotation/admin.css"]}

    def _model_note(self, extra_context):
        # A note in the page, not a message: messages pile up across the action's POST and the
        # redirect that follows, and the researcher would read the same paragraph three times.
        note = "" if llm.reference_model_configured() else references.NOT_CONFIGURED_MESSAGE
        return {**(extra_context or {}), "reference_model_note": note}

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, self._model_note(extra_context))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return super().change_view(request, object_id, form_url, self._model_note(extra_context))

    @admin.action(description="Generate candidate references (background job)")
    def generate_references(self, request, queryset):
        if not llm.reference_model_configured():
            self.message_user(request, "Nothing was queued: there is no reference model (see the note "
                                       "above); paste references by hand instead.", messages.ERROR)
            return
        waiting = queryset.filter(status=Instance.Status.AWAITING_REFERENCE)
        for instance in waiting:
            captions.queue_reference_generation(instance_id=instance.pk)
        skipped = queryset.count() - waiting.count()
        self.message_user(request, f"Queued reference generation for {waiting.count()} instance(s)"
                                   + (f"; {skipped} not awaiting a reference were left alone." if skipped else "."))
        if waiting.exists():
            say_if_jobs_will_wait(self, request)

    def get_urls(self):
        return [
            path("<int:instance_id>/add-reference/", self.admin_site.admin_view(self.add_reference_view),
                 name="annotation_instance_add_reference"),
        ] + super().get_urls()

    def add_reference_view(self, request, instance_id):
        instance = get_object_or_404(Instance, pk=instance_id)
        if not request.user.has_perm("annotation.add_reference"):
            self.message_user(request, "You may not add references.", messages.ERROR)
            return redirect("admin:annotation_instance_change", instance.pk)
        form = ManualReferenceForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                references.add_manual_reference(instance=instance, text=form.cleaned_data["text"],
                                              user=request.user)
            except AnnotationError as error:
                form.add_error("text", str(error))
            else:
                self.message_user(request, f"Reference added to instance #{instance.pk}; it now awaits verification.")
                return redirect("admin:annotation_instance_change", instance.pk)
        context = {**self.admin_site.each_context(request), "form": form, "instance": instance,
                   "opts": self.model._meta, "title": f"Paste a reference for instance #{instance.pk}",
                   "caption": instance.current_caption, "images": instance.ordered_images(),
                   "model_configured": llm.reference_model_configured(),
                   "not_configured_message": references.NOT_CONFIGURED_MESSAGE}
        return TemplateResponse(request, "admin/annotation/add_reference.html", context)


class VerificationInline(admin.TabularInline):
    model = Verification
    extra = 0
    fields = ["worker", "is_correct", "problem_in_caption", "problem_in_response", "is_harmful", "comment"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Reference)
class ReferenceAdmin(admin.ModelAdmin):
    list_display = ["id", "instance", "source", "model", "verdict", "problem_in_caption",
                    "problem_in_response", "flagged_harmful", "prompt_tokens", "completion_tokens",
                    "cost_usd"]
    list_filter = ["verdict", "source", "model", "flagged_harmful"]
    search_fields = ["text", "instance__instruction"]
    readonly_fields = [field.name for field in Reference._meta.fields]
    inlines = [VerificationInline]

    def has_add_permission(self, request):
        # References come from the model job, an import, or "Paste a reference" on an instance.
        return False


@admin.register(Verification)
class VerificationAdmin(admin.ModelAdmin):
    list_display = ["id", "reference", "worker", "is_correct", "problem_in_caption",
                    "problem_in_response", "is_harmful", "created_at"]
    list_filter = ["is_correct", "problem_in_caption", "problem_in_response", "is_harmful"]
    readonly_fields = [field.name for field in Verification._meta.fields]

    def has_add_permission(self, request):
        return False


# --- the queue -----------------------------------------------------------------------------------


@admin.register(WorkUnit)
class WorkUnitAdmin(admin.ModelAdmin):
    list_display = ["id", "stage", "family", "key", "overlap", "submitted", "status", "created_at"]
    list_filter = ["stage", "status", "family"]
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
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["id", "unit", "worker", "status", "leased_at", "lease_expires_at", "submitted_at",
                    "active_seconds"]
    list_filter = ["status", "unit__stage"]
    raw_id_fields = ["unit", "worker"]
    readonly_fields = ["leased_at", "submitted_at", "active_seconds"]


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ["id", "platform", "external_id", "pseudonym", "user", "created_at"]
    list_filter = ["platform"]
    search_fields = ["external_id"]
    raw_id_fields = ["user"]
