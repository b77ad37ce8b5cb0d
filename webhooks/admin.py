from django import forms
from django.contrib import admin, messages

from annotation.admin.audit import AuditTrailMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.teams import GroupScopedAdminMixin
from crowdbench.events import EVENTS
from webhooks.models import ENDPOINT_GROUPS, Delivery, Endpoint
from webhooks.sending import send_again


class EndpointForm(forms.ModelForm):
    events = forms.MultipleChoiceField(choices=list(EVENTS.items()), widget=forms.CheckboxSelectMultiple,
                                       help_text="The events POSTed to this URL (docs/webhooks.md shows each body).")

    class Meta:
        model = Endpoint
        fields = ["url", "events", "family", "tournament", "study", "active", "description", "secret"]
        help_texts = {"family": "One family, tournament or study; none: events about everything."}


@admin.register(Endpoint)
class EndpointAdmin(GroupScopedAdminMixin, AuditTrailMixin, admin.ModelAdmin):
    """A researcher's webhook URLs, each for one family, tournament or study."""

    group_path = ENDPOINT_GROUPS
    form = EndpointForm
    list_display = ["url", "scope_label", "event_list", "active", "created_at"]
    list_filter = ["active"]
    search_fields = ["url", "description"]
    raw_id_fields = ["family", "tournament", "study"]

    @admin.display(description="events")
    def event_list(self, endpoint):
        return ", ".join(endpoint.events)

    @admin.display(description="about")
    def scope_label(self, endpoint):
        return endpoint.scope_label


@admin.register(Delivery)
class DeliveryAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    """The delivery log: every event owed to a URL or to the researchers' e-mail, and how it went."""

    group_path = tuple(f"endpoint__{path}" for path in ENDPOINT_GROUPS)
    list_display = ["event", "scope", "recipient", "status", "attempts", "last_error", "response_status",
                    "next_attempt_at", "created_at"]
    list_filter = ["status", "channel", "event"]
    search_fields = ["event_id", "scope", "last_error", "endpoint__url"]
    readonly_fields = [field.name for field in Delivery._meta.fields]
    actions = ["send_again"]

    def has_add_permission(self, request):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("endpoint")

    @admin.display(description="to")
    def recipient(self, delivery):
        return delivery.endpoint.url if delivery.endpoint_id else "e-mail"

    @admin.action(description="Send again", permissions=["change"])
    def send_again(self, request, queryset):
        queued = send_again(deliveries=queryset)
        self.message_user(request, f"{queued} delivery(ies) queued to be sent again from their first attempt; "
                                   "a receiver can drop one it already has by its event id.", messages.SUCCESS)
