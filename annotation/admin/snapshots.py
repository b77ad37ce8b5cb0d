"""Snapshots in admin: request one (its build runs in the background), watch it, read it.

A snapshot is immutable, so every field of an existing one is read-only and none is deleted.
"""

from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join

from annotation import snapshots
from annotation.exceptions import AnnotationError
from annotation.models import Snapshot


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = ["version", "status", "progress_bar", "created_at", "created_by", "short_hash"]
    list_filter = ["status"]
    filter_horizontal = ["studies"]
    add_fields = ["note", "studies"]
    readonly_fields = ["version", "status", "progress_bar", "progress_message", "error",
                       "created_at", "created_by", "finished_at", "content_sha256", "file_links",
                       "diff_with_previous", "manifest"]

    def get_fields(self, request, obj=None):
        return self.add_fields if obj is None else ["note", "studies", *self.readonly_fields]

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else [*self.readonly_fields, "note", "studies"]

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

    @admin.display(description="progress")
    def progress_bar(self, obj):
        return format_html('<progress max="100" value="{}"></progress> {}% {}', obj.progress,
                           obj.progress, obj.progress_message)

    @admin.display(description="content sha256")
    def short_hash(self, obj):
        return obj.content_sha256[:12]

    @admin.display(description="files")
    def file_links(self, obj):
        storage = snapshots.snapshot_storage()
        return format_html("<ul>{}</ul>", format_html_join(
            "", '<li><a href="{}">{}</a> ({} rows, {} bytes)</li>',
            ((storage.url(entry["path"]), entry["name"], entry["rows"], entry["bytes"])
             for entry in obj.files if "path" in entry),
        ))

    @admin.display(description="diff with the previous snapshot")
    def diff_with_previous(self, obj):
        if obj.status != Snapshot.Status.DONE:
            return "-"
        return snapshots.diff_snapshots(new=obj).summary()
