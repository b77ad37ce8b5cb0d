from django import forms
from django.contrib import admin, messages

from annotation.admin.audit import AuditTrailMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.admin.teams import GroupScopedAdminMixin
from crowdbench.events import EVENTS
from webhooks.models import Delivery, Endpoint, new_secret
from webhooks.sending import send_again
from webhooks.services import SCOPES, choosable, rotate_secret, scope_problem


class EndpointForm(forms.ModelForm):
    events = forms.MultipleChoiceField(choices=list(EVENTS.items()), widget=forms.CheckboxSelectMultiple,
                                       help_text="The events POSTed to this URL (docs/webhooks.md shows each body).")
    # Write-only: typed (or left empty to have one made) when the endpoint is added, shown once
    # after saving, and never rendered again (the change page has no such field; rotate instead).
    secret = forms.CharField(required=False, max_length=128, widget=forms.PasswordInput(render_value=False),
                             help_text="Signs every delivery (HMAC-SHA256). Leave empty to have one made; "
                                       "it is shown once, after saving.")

    class Meta:
        model = Endpoint
        fields = ["url", "events", "family", "tournament", "study", "active", "description", "secret"]
        help_texts = {"family": "One family, tournament or study; none: events about everything."}

    def clean_secret(self):
        return self.cleaned_data.get("secret") or new_secret()

    def clean(self):
        data = super().clean()
        problem = scope_problem(user=self.user, **{name: data.get(name) for name in SCOPES})
        if problem:
            raise forms.ValidationError(problem)
        return data


@admin.register(Endpoint)
class EndpointAdmin(GroupScopedAdminMixin, AuditTrailMixin, admin.ModelAdmin):
    """A researcher's webhook URLs, each for one family, tournament or study."""

    form = EndpointForm
    list_display = ["url", "scope_label", "event_list", "active", "created_at"]
    list_filter = ["active"]
    search_fields = ["url", "description"]
    raw_id_fields = ["family", "tournament", "study"]
    actions = ["rotate_secret"]

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.user = request.user
        return form

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name in SCOPES:
            kwargs["queryset"] = choosable(db_field.related_model, request.user, via=SCOPES[db_field.name])
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        return fields if obj is None else [name for name in fields if name != "secret"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:
            _show_once(self, request, obj, obj.secret)

    @admin.action(description="Rotate the signing secret (shown once)", permissions=["change"])
    def rotate_secret(self, request, queryset):
        for endpoint in queryset:
            _show_once(self, request, endpoint, rotate_secret(endpoint=endpoint, actor=request.user))

    @admin.display(description="events")
    def event_list(self, endpoint):
        return ", ".join(endpoint.events)

    @admin.display(description="about")
    def scope_label(self, endpoint):
        return endpoint.scope_label


def _show_once(model_admin, request, endpoint, secret):
    model_admin.message_user(
        request, f"The signing secret of {endpoint.url} is {secret} . Give it to the receiver now: it is "
                 "not shown again (rotate it to have a new one).", messages.WARNING)


@admin.register(Delivery)
class DeliveryAdmin(LargeTableAdminMixin, GroupScopedAdminMixin, admin.ModelAdmin):
    """The delivery log: every event owed to a URL or to the researchers' e-mail, and how it went."""

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
