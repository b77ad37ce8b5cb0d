"""Instances, their captions, candidate references and verifications in the admin."""


from django import forms
from django.contrib import admin, messages
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from annotation import llm
from annotation.admin.audit import AuditTrailMixin
from annotation.admin.images import thumbnail_html
from annotation.admin.page_rows import PageRowsAdminMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.review import DisagreementFilter, adjudicate_action, page_votes, votes_summary
from annotation.admin.search import SearchFieldByFieldMixin
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.admin.worker_check import say_if_jobs_will_wait
from annotation.collection import captions, references
from annotation.exceptions import AnnotationError
from annotation.models import (
    Caption,
    DecisionChange,
    Instance,
    InstanceImage,
    Reference,
    Verification,
)


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
    fields = ["source", "model", "text", "verdict", "decided_by_text", "problem_in_caption", "problem_in_response",
              "flagged_harmful", "cost_usd"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    @admin.display(description="decided by")
    def decided_by_text(self, reference):
        return reference.decided_by_text

    def has_add_permission(self, request, obj=None):
        return False


class ManualReferenceForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 8, "cols": 90}),
                           help_text="The candidate reference; verifiers will judge it like a generated one.")


@admin.register(Instance)
class InstanceAdmin(PageRowsAdminMixin, SearchFieldByFieldMixin, LargeTableAdminMixin, GroupScopedAdminMixin,
                    admin.ModelAdmin):
    change_list_template = "admin/annotation/instance/change_list.html"
    change_form_template = "admin/annotation/instance/change_form.html"
    list_display = ["id", "family", "short_instruction", "status", "image_count", "author"]
    list_filter = ["status", "family__is_multi_image", "family"]
    # A word of the instruction (a trigram index, migration 0029) or of the family's name.
    search_fields = ["instruction", "family__name"]
    raw_id_fields = ["author", "current_caption"]
    readonly_fields = ["status", "created_at", "updated_at", "add_reference_link"]
    inlines = [InstanceImageInline, CaptionInline, ReferenceInline]
    actions = ["generate_references"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("family", "author")

    def fill_page_rows(self, request, rows):
        counts = dict(InstanceImage.objects.filter(instance__in=rows).order_by().values("instance")
                      .annotate(n=Count("*")).values_list("instance", "n"))
        for instance in rows:
            instance.n_images = counts.get(instance.pk, 0)

    @admin.display(description="instruction")
    def short_instruction(self, instance):
        return instance.instruction if len(instance.instruction) < 90 else f"{instance.instruction[:87]}…"

    @admin.display(description="images", ordering=Coalesce(Subquery(
        InstanceImage.objects.filter(instance=OuterRef("pk")).order_by().values("instance")
        .annotate(n=Count("*")).values("n")), 0))
    def image_count(self, instance):
        return instance.n_images

    @admin.display(description="reference by hand")
    def add_reference_link(self, instance):
        if instance.status not in (Instance.Status.AWAITING_REFERENCE, Instance.Status.AWAITING_VERIFICATION):
            return "-"
        url = reverse("admin:annotation_instance_add_reference", args=[instance.pk])
        return format_html('<a class="button" href="{}">Paste a reference</a>', url)

    def _model_note(self, extra_context):
        # A note in the page, not a message: messages pile up across the action's POST and the
        # redirect that follows, and the researcher would read the same paragraph three times.
        note = "" if llm.reference_model_configured() else references.NOT_CONFIGURED_MESSAGE
        return {**(extra_context or {}), "reference_model_note": note}

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, self._model_note(extra_context))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return super().change_view(request, object_id, form_url, self._model_note(extra_context))

    @admin.action(description="Generate candidate references (background job)", permissions=["change"])
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
        instance = get_object_or_404(self.get_queryset(request), pk=instance_id)
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
    fields = ["worker", "is_correct", "problem_in_caption", "problem_in_response", "is_harmful", "comment",
              "review"]
    readonly_fields = fields
    can_delete = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("worker", "assignment")

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="review")
    def review(self, vote):
        # Beside the list's tally, which counts only the votes that count (counted_verifications).
        if vote.assignment_id is None:
            return "none needed (a researcher's or an import's)"
        return vote.assignment.get_work_state_display()


class HeldForReviewFilter(admin.SimpleListFilter):
    """References a worker model was held on: its label contradicted every counted vote."""

    title = "held for a reviewer"
    parameter_name = "held"

    def lookups(self, request, model_admin):
        return [("yes", "held for a reviewer")]

    def queryset(self, request, queryset):
        return queryset.exclude(held_for_review="") if self.value() == "yes" else queryset


@admin.register(DecisionChange)
class DecisionChangeAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    """What later fits of the worker models changed, read-only: the job writes these."""

    list_display = ["changed_at", "reference", "model", "before", "after", "posterior_before", "posterior_after",
                    "applied", "note"]
    list_filter = ["applied", "model"]
    list_select_related = ["reference"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Reference)
class ReferenceAdmin(PageRowsAdminMixin, SearchFieldByFieldMixin, LargeTableAdminMixin, GroupScopedAdminMixin,
                     AuditTrailMixin, admin.ModelAdmin):
    list_display = ["id", "instance", "source", "model", "verdict", "decided_by_text", "votes", "held_for_review",
                    "adjudicated_by", "problem_in_caption", "problem_in_response", "flagged_harmful", "prompt_tokens",
                    "completion_tokens", "cost_usd"]
    list_filter = ["verdict", "decided_by", DisagreementFilter, HeldForReviewFilter, "source", "model",
                   "flagged_harmful"]
    actions = [adjudicate_action]

    # Words from a reference or its instruction: each field has a trigram index (migration 0029).
    search_fields = ["text", "instance__instruction"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("instance__family", "adjudicated_by")

    def fill_page_rows(self, request, rows):
        page_votes(rows)

    @admin.display(description="verifiers")
    def votes(self, reference):
        return votes_summary(reference)

    readonly_fields = [field.name for field in Reference._meta.fields] + ["decided_by_text"]
    inlines = [VerificationInline]

    @admin.display(description="decided by", ordering="decided_by")
    def decided_by_text(self, reference):
        return reference.decided_by_text

    def has_add_permission(self, request):
        # References come from the model job, an import, or "Paste a reference" on an instance.
        return False


@admin.register(Verification)
class VerificationAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    list_display = ["id", "reference", "worker", "is_correct", "problem_in_caption",
                    "problem_in_response", "is_harmful", "created_at"]
    list_filter = ["is_correct", "problem_in_caption", "problem_in_response", "is_harmful"]
    readonly_fields = [field.name for field in Verification._meta.fields]

    def has_add_permission(self, request):
        return False
