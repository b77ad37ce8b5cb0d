"""What became of each piece of background work, for researchers and for the outbox sweep.

The work itself is owed by domain rows (an instance awaiting a reference, a running judge run, a
pending snapshot); a Job row only says when it was last queued and how its latest attempt ended,
so a failure has a reason to show and the sweep (tasks/outbox.py) does not queue it twice.
"""

from django.db import models

from annotation.model_checks import StorableJSONField


class Job(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        RETRYING = "retrying", "Retrying"
        FAILED = "failed", "Failed"
        DONE = "done", "Done"

    key = models.CharField(max_length=200, unique=True,
                           help_text="The task's name and arguments: one row per piece of work.")
    task = models.CharField(max_length=100)
    args = StorableJSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True, help_text="Why the latest attempt failed.")
    note = models.CharField(max_length=300, blank=True,
                            help_text="Why the outbox sweep closed the job, when it did.")
    attempts = models.PositiveIntegerField(default=0)
    queued_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["status", "updated_at"], name="job_status_idx")]

    def __str__(self):
        return f"{self.key} ({self.get_status_display().lower()})"
