"""Datasets in and out: snapshots (versioned, immutable exports; DESIGN.md step 10) and the
sheets a published file was imported from, kept to write it back."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.model_checks import CheckedFields, StorableJSONField
from annotation.models.instances import Instance
from annotation.models.preferences import Tournament


class SnapshotManager(models.Manager):
    # A snapshot's per-instance digests are megabytes at campaign size (7 MB for 100,000 instances)
    # and only a diff reads them: every list, workflow page and API answer left them unread.
    def get_queryset(self):
        return super().get_queryset().defer("instance_digests")


class Snapshot(CheckedFields, models.Model):
    """The verified benchmark and the judgements of chosen tournaments, frozen at one moment.

    A snapshot is written once: its rows may change only while it is being built (through
    QuerySet.update by annotation/datasets/snapshots.py); once done or failed, save() and delete() refuse.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    version = models.PositiveIntegerField(unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    note = models.TextField(blank=True)
    group = models.ForeignKey("annotation.ResearchGroup", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+",
                              help_text="The research group that owns it; empty: staff outside groups.")
    tournaments = models.ManyToManyField(Tournament, blank=True, related_name="snapshots",
                                         help_text="Tournaments whose judgements go in; none: no judgements.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent of the files written.")
    progress_message = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    content_sha256 = models.CharField(max_length=64, blank=True,
                                      help_text="sha256 over the data files' names and hashes, in name order.")
    manifest = StorableJSONField(default=dict, blank=True)
    files = StorableJSONField(default=list, blank=True,
                             help_text="[{name, path, sha256, bytes, rows}] in name order.")
    instance_digests = StorableJSONField(default=dict, blank=True,
                                        help_text="Instance id -> sha256 of its exported row, for diffs.")

    objects = SnapshotManager()

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.CheckConstraint(condition=Q(version__gte=1), name="snapshot_version_positive",
                                   violation_error_message="A snapshot's version is 1 or more."),
        ]

    def __str__(self):
        return f"Snapshot v{self.version}"

    def save(self, *args, **kwargs):
        if self.pk is not None and self._stored_status() in (self.Status.DONE, self.Status.FAILED):
            from annotation.exceptions import AnnotationError

            raise AnnotationError(f"{self} is immutable: make a new snapshot instead.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._stored_status() == self.Status.DONE:
            from annotation.exceptions import AnnotationError

            raise AnnotationError(f"{self} is published and immutable; it cannot be deleted.")
        return super().delete(*args, **kwargs)

    @property
    def is_frozen(self):
        return self.status in (self.Status.DONE, self.Status.FAILED)

    def _stored_status(self):
        return type(self).objects.filter(pk=self.pk).values_list("status", flat=True).first()


class ImportedSheet(models.Model):
    """A sheet file as imported: its layout as written (columns, booleans, line ends).

    Exports write a table in this layout when every instance in it came from sheets of this
    layout, so a published file imported alone comes back byte for byte.
    """

    class Kind(models.TextChoices):
        MULTI_IMAGE = "multi_image", "Multi-image sheet"
        SINGLE_IMAGE = "single_image", "Single-image sheet"
        FULLY_ANNOTATED = "fully_annotated", "Fully annotated example"

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    source_dataset = models.CharField(max_length=200, blank=True)
    columns = StorableJSONField(default=list, help_text="The header, as written.")
    boolean_words = StorableJSONField(
        default=list, help_text="Per column, how the file spells [true, false]; empty for others.")
    line_terminator = models.CharField(max_length=2, default="\n")
    ends_with_newline = models.BooleanField(default=True)
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"{self.name} ({self.get_kind_display()})"


class ImportedRow(models.Model):
    """One row of an imported sheet and the instance it became (an identical repeat of an earlier
    row points at the same instance), with its cells as written."""

    sheet = models.ForeignKey(ImportedSheet, on_delete=models.CASCADE, related_name="rows")
    number = models.PositiveIntegerField(help_text="The row as a spreadsheet numbers it (header: 1).")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="imported_rows")
    cells = StorableJSONField(default=list)

    class Meta:
        ordering = ["sheet_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["sheet", "number"], name="imported_row_number_unique"),
        ]

    def __str__(self):
        return f"Row {self.number} of {self.sheet.name}"
