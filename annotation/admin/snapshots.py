"""Snapshots in admin: request one (its build runs in the background), watch it, read it.

A snapshot is immutable, so every field of an existing one is read-only and none is deleted.
"""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from annotation.admin.audit import AuditTrailMixin
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.admin.worker_check import say_if_jobs_will_wait
from annotation.datasets import downloads, manifest, snapshots
from annotation.exceptions import AnnotationError
from annotation.models import Snapshot
from annotation.public_urls import placeholder_warning


class SnapshotForm(forms.ModelForm):
    class Meta:
        model = Snapshot
        fields = ["note", "group", "tournaments"]

    def clean(self):
        data = super().clean()
        try:
            snapshots.check_scope(group=data.get("group"), tournaments=data.get("tournaments") or [])
        except AnnotationError as error:
            raise ValidationError(str(error)) from None
        return data


@admin.register(Snapshot)
class SnapshotAdmin(GroupScopedAdminMixin, AuditTrailMixin, admin.ModelAdmin):
    form = SnapshotForm
    list_display = ["version", "status", "progress_bar", "created_at", "created_by", "short_hash"]
    list_filter = ["status"]
    filter_horizontal = ["tournaments"]
    add_fields = ["note", "group", "tournaments"]
    readonly_fields = ["version", "status", "progress_bar", "progress_message", "error",
                       "created_at", "created_by", "finished_at", "content_sha256", "file_links",
                       "diff_with_previous", "manifest"]

    def add_view(self, request, form_url="", extra_context=None):
        if request.method == "GET" and (warning := placeholder_warning("this snapshot's image URLs")):
            self.message_user(request, warning, messages.WARNING)
        return super().add_view(request, form_url, extra_context)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        if object_id is None:
            return super().changeform_view(request, object_id, form_url, extra_context)
        # A snapshot is immutable: its page offers nothing to save, and a save posted anyway is
        # told so rather than reaching save_model's refusal as a server error.
        if request.method == "POST":
            snapshot = get_object_or_404(self.get_queryset(request), pk=object_id)
            self.message_user(request, f"{snapshot} is immutable: nothing was saved.", messages.ERROR)
            return redirect(request.path)
        extra_context = {**(extra_context or {}), "show_save": False, "show_save_and_continue": False,
                         "show_save_and_add_another": False}
        return super().changeform_view(request, object_id, form_url, extra_context)

    def get_fields(self, request, obj=None):
        return self.add_fields if obj is None else ["note", "group", "tournaments", *self.readonly_fields]

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else [*self.readonly_fields, "note", "group", "tournaments"]

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        if change:
            raise AnnotationError(f"{obj} is immutable.")
        obj.created_by = request.user
        snapshots.assign_version(snapshot=obj)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        snapshots.enqueue_build(snapshot=form.instance)
        self.message_user(request, f"{form.instance} is being built in the background.",
                          messages.SUCCESS)
        say_if_jobs_will_wait(self, request)

    @admin.display(description="progress")
    def progress_bar(self, obj):
        return format_html('<progress max="100" value="{}"></progress> {}% {}', obj.progress,
                           obj.progress, obj.progress_message)

    @admin.display(description="content sha256")
    def short_hash(self, obj):
        return obj.content_sha256[:12]

    def get_urls(self):
        download = path("<int:object_id>/files/<path:name>", self.admin_site.admin_view(self.download_view),
                        name="annotation_snapshot_file")
        return [download, *super().get_urls()]

    def download_view(self, request, object_id, name):
        """A snapshot file, for a researcher allowed to view snapshots (admin_view has already
        sent anybody else to the login page)."""
        if not downloads.may_download(request.user):
            raise PermissionDenied
        snapshot = get_object_or_404(self.get_queryset(request), pk=object_id)
        reason = downloads.withheld(snapshot, request.user)
        if reason:
            messages.error(request, reason)
            return redirect("admin:annotation_snapshot_change", snapshot.pk)
        return downloads.file_response(snapshot=snapshot, name=name)

    @admin.display(description="files")
    def file_links(self, obj):
        entries = {entry["name"]: entry for entry in obj.files if "path" in entry}
        return format_html("<ul>{}</ul>", format_html_join(
            "", '<li><a href="{}" download>{}</a>{}</li>',
            ((reverse("admin:annotation_snapshot_file", args=[obj.pk, name]), name,
              f" ({entries[name]['rows']} rows, {entries[name]['bytes']} bytes)" if name in entries else "")
             for name in snapshots.downloadable_names(obj)),
        ))

    @admin.display(description="diff with the previous snapshot")
    def diff_with_previous(self, obj):
        if obj.status != Snapshot.Status.DONE:
            return "-"
        return manifest.diff_snapshots(new=obj).summary()
