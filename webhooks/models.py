"""Where events go (Endpoint) and what each one is owed (Delivery, the outbox row)."""

import secrets

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models
from django.db.models import Q

from annotation.model_checks import CheckedFields, StorableJSONField
from crowdbench.events import EVENTS
from crowdbench.outbound import PublicAddressValidator


def new_secret():
    return secrets.token_hex(32)




class Endpoint(CheckedFields, models.Model):
    """A researcher's URL, told of the chosen events about one family, tournament or study (or,
    with none chosen, about everything)."""

    url = models.URLField(max_length=500, validators=[URLValidator(schemes=["http", "https"]),
                                                      PublicAddressValidator("WEBHOOK_ALLOWED_NETWORKS")],
                          help_text="Where events are POSTed as JSON.")
    secret = models.CharField(
        max_length=128, default=new_secret,
        help_text="Signs every delivery (HMAC-SHA256); give it to the receiver to check signatures.")
    events = StorableJSONField(default=list, help_text="The event types sent to this URL.")
    family = models.ForeignKey("annotation.InstructionFamily", null=True, blank=True, on_delete=models.CASCADE,
                               related_name="webhook_endpoints")
    tournament = models.ForeignKey("annotation.Tournament", null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="webhook_endpoints")
    study = models.ForeignKey("mturk.CrowdStudy", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="webhook_endpoints")
    active = models.BooleanField(default=True, help_text="Untick to stop sending (nothing is recorded meanwhile).")
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(family__isnull=True, tournament__isnull=True)
                           | Q(family__isnull=True, study__isnull=True)
                           | Q(tournament__isnull=True, study__isnull=True)),
                name="webhook_endpoint_one_scope_at_most",
                violation_error_message="An endpoint is scoped to one family, tournament or study at most.",
            ),
        ]

    def __str__(self):
        return f"{self.url} ({self.scope_label})"

    @property
    def scope_label(self):
        scope = self.family or self.tournament or self.study
        return f"{scope._meta.verbose_name} “{scope}”" if scope else "everything"

    def clean(self):
        unknown = [event for event in self.events or [] if event not in EVENTS]
        if unknown or not self.events:
            raise ValidationError({"events": f"Choose events among {', '.join(EVENTS)}."})
        if sum(scope is not None for scope in (self.family_id, self.tournament_id, self.study_id)) > 1:
            raise ValidationError("Choose one family, tournament or study, or none for everything.")


class Delivery(models.Model):
    """One event owed to one consumer: an endpoint's URL, or the researchers' e-mail (no endpoint).

    Written in the transaction of the change that caused the event, and unique per event and
    consumer, so an event emitted twice is sent once; the background job that sends it retries
    with growing waits until it is taken or its attempts are spent."""

    class Channel(models.TextChoices):
        WEBHOOK = "webhook", "Webhook"
        EMAIL = "email", "E-mail"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed (attempts spent)"

    endpoint = models.ForeignKey(Endpoint, null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices, default=Channel.WEBHOOK)
    event_id = models.UUIDField(help_text="The same for every consumer of one event; sent in a header.")
    event = models.CharField(max_length=40)
    scope = models.CharField(max_length=300, blank=True, help_text="What the event is about.")
    payload = StorableJSONField(help_text="The JSON body sent.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    next_attempt_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event_id"], name="delivery_once_per_endpoint"),
            models.UniqueConstraint(fields=["event_id"], condition=Q(endpoint__isnull=True),
                                    name="delivery_one_email_per_event"),
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due_idx")]

    def __str__(self):
        where = self.endpoint.url if self.endpoint_id else "e-mail"
        return f"{self.event} to {where} ({self.get_status_display().lower()})"
