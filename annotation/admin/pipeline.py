"""The researchers' side: families, stages, progress, references, imports and the Table 2 report."""

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from annotation import imports, references, selectors, services
from annotation.exceptions import AnnotationError
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
)
from annotation.uploads import store_uploaded_image


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


@admin.register(ImageAsset)
class ImageAssetAdmin(admin.ModelAdmin):
    form = ImageAssetForm
    list_display = ["id", "thumbnail", "licence", "author", "width", "height", "created_at"]
    search_fields = ["url", "author", "licence", "sha256"]
    readonly_fields = ["thumbnail", "width", "height", "sha256", "uploaded_by"]

    @admin.display(description="image")
    def thumbnail(self, image):
        if not image.display_url:
            return "-"
        return format_html('<img src="{}" alt="" style="max-height:80px;max-width:120px">',
                           image.display_url)

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


class SeedImageInline(admin.TabularInline):
    model = SeedImage
    extra = 1
    raw_id_fields = ["image"]


class StageConfigInline(admin.TabularInline):
    model = StageConfig
    extra = 0
    fields = ["stage", "overlap", "lease_minutes", "launched_at", "verification_rule",
              "on_incorrect", "max_caption_rounds"]
    readonly_fields = ["launched_at"]


def _launch_action(stage):
    def action(modeladmin, request, queryset):
        for family in queryset:
            config = _report_errors(modeladmin, request,
                                    lambda family=family: services.launch_stage(family=family, stage=stage))
            if config:
                modeladmin.message_user(
                    request, f"{Stage(stage).label} launched for “{family.name}”; its work units are being created."
                )

    action.__name__ = f"launch_{stage}"
    action.short_description = f"Launch {Stage(stage).label.lower()}"
    return action


class VisitBenchImportForm(forms.Form):
    sheet = forms.FileField(help_text="visit_bench_multi_images.csv, the single-image sheet, or the "
                                      "fully annotated example.")


@admin.register(InstructionFamily)
class InstructionFamilyAdmin(admin.ModelAdmin):
    change_list_template = "admin/annotation/instructionfamily/change_list.html"
    list_display = ["name", "source", "is_multi_image", "target_instances", "instance_count",
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
    actions = [_launch_action(stage) for stage in Stage.values]

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
        rows = selectors.stage_progress(family)
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
            path("import-visit-bench/", self.admin_site.admin_view(self.import_view),
                 name="annotation_instructionfamily_import"),
            path("table2/", self.admin_site.admin_view(self.table2_view),
                 name="annotation_instructionfamily_table2"),
        ] + super().get_urls()

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
        table = selectors.table2(family=family)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": "Verification report (paper Table 2)",
                   "columns": [name for name, _ in table.columns()],
                   "rows": selectors.table2_rows(table),
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
        url = link.image.display_url if link.pk else ""
        return format_html('<img src="{}" alt="" style="max-height:120px">', url) if url else "-"


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

    def _warn_when_no_model(self, request):
        if not references.reference_model_configured():
            self.message_user(request, references.NOT_CONFIGURED_MESSAGE, messages.WARNING)

    def changelist_view(self, request, extra_context=None):
        self._warn_when_no_model(request)
        return super().changelist_view(request, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if request.method == "GET":
            self._warn_when_no_model(request)
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.action(description="Generate candidate references (background job)")
    def generate_references(self, request, queryset):
        if not references.reference_model_configured():
            self.message_user(request, references.NOT_CONFIGURED_MESSAGE, messages.ERROR)
            return
        from tasks.pipeline import generate_reference_job

        waiting = queryset.filter(status=Instance.Status.AWAITING_REFERENCE)
        for instance in waiting:
            generate_reference_job.delay(instance.pk)
        skipped = queryset.count() - waiting.count()
        self.message_user(request, f"Queued reference generation for {waiting.count()} instance(s)"
                                   + (f"; {skipped} not awaiting a reference were left alone." if skipped else "."))

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
                services.add_manual_reference(instance=instance, text=form.cleaned_data["text"],
                                              user=request.user)
            except AnnotationError as error:
                form.add_error("text", str(error))
            else:
                self.message_user(request, f"Reference added to instance #{instance.pk}; it now awaits verification.")
                return redirect("admin:annotation_instance_change", instance.pk)
        context = {**self.admin_site.each_context(request), "form": form, "instance": instance,
                   "opts": self.model._meta, "title": f"Paste a reference for instance #{instance.pk}",
                   "caption": instance.current_caption,
                   "model_configured": references.reference_model_configured(),
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
    raw_id_fields = ["instance", "reference"]

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
