"""Webhooks in the researchers' REST API: register, change and remove endpoints; read the delivery
log and send a delivery again. The same model permissions as the admin (annotation/api)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAdminUser
from rest_framework.response import Response

from annotation import teams
from annotation.api.numbers import ID_PATH_PATTERN
from annotation.api.views import GroupScopedMixin
from crowdbench.events import EVENTS
from webhooks.models import Delivery, Endpoint
from webhooks.sending import send_again
from webhooks.services import SCOPES, choosable, rotate_secret, scope_problem


class EndpointSerializer(serializers.ModelSerializer):
    events = serializers.ListField(child=serializers.ChoiceField(choices=list(EVENTS)), allow_empty=False,
                                   max_length=len(EVENTS))

    class Meta:
        model = Endpoint
        fields = ["id", "url", "events", "family", "tournament", "study", "active", "description", "created_at"]
        read_only_fields = ["created_at"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is None:  # the schema's generator, which reads fields only
            return
        # Another group's family, tournament or study is, to this caller, one that does not exist.
        for name, via in SCOPES.items():
            field = self.fields[name]
            field.queryset = choosable(field.queryset.model, request.user, via=via)

    def validate_events(self, events):
        return list(dict.fromkeys(events))

    def validate(self, data):
        scopes = {name: data.get(name, getattr(self.instance, name, None)) for name in SCOPES}
        if sum(scope is not None for scope in scopes.values()) > 1:
            raise serializers.ValidationError("Choose one family, tournament or study, or none for everything.")
        request = self.context.get("request")
        problem = scope_problem(user=request.user if request is not None else None, **scopes)
        if problem:
            raise serializers.ValidationError(problem)
        return data


class CreatedEndpointSerializer(EndpointSerializer):
    """The answer to a registration: the endpoint with its signing secret, shown this once."""

    class Meta(EndpointSerializer.Meta):
        fields = [*EndpointSerializer.Meta.fields, "secret"]
        read_only_fields = [*EndpointSerializer.Meta.read_only_fields, "secret"]


class SecretSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    secret = serializers.CharField()


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = Delivery
        fields = ["id", "endpoint", "channel", "event_id", "event", "scope", "status", "attempts", "last_error",
                  "response_status", "next_attempt_at", "created_at", "updated_at", "delivered_at", "payload"]


class MayChangeEndpoints(BasePermission):
    def has_permission(self, request, view):
        return request.user.has_perms(["webhooks.view_endpoint", "webhooks.change_endpoint"])


class EndpointViewSet(GroupScopedMixin, viewsets.ModelViewSet):
    """Webhook endpoints: where events are POSTed, signed with the endpoint's secret (docs/webhooks.md)."""

    serializer_class = EndpointSerializer

    def get_queryset(self):
        return Endpoint.objects.all()

    lookup_value_regex = ID_PATH_PATTERN
    filterset_fields = ["family", "tournament", "study", "active"]
    ordering_fields = ["id", "created_at"]
    ordering = ["id"]

    def get_serializer_class(self):
        return CreatedEndpointSerializer if self.action == "create" else EndpointSerializer

    def check_object_permissions(self, request, endpoint):
        super().check_object_permissions(request, endpoint)
        # Seeing an endpoint is every member's; changing it, rotating its secret or removing it is
        # for the roles that change their group's rows.
        owner = teams.owner(endpoint, via=teams.ENDPOINT_GROUPS)
        if request.method not in SAFE_METHODS and not teams.may_change(request.user, owner):
            raise PermissionDenied("Your role in this endpoint's research group does not let you change it.")

    @extend_schema(request=None, responses=SecretSerializer)
    @action(detail=True, methods=["post"], permission_classes=[IsAdminUser, MayChangeEndpoints])
    def rotate_secret(self, request, pk=None):
        """Give the endpoint a new signing secret, returned this once."""
        endpoint = self.get_object()
        secret = rotate_secret(endpoint=endpoint, actor=request.user)
        return Response(SecretSerializer({"id": endpoint.pk, "secret": secret}).data)


class MaySendAgain(BasePermission):
    """Sending again changes a delivery, as the admin's action does."""

    def has_permission(self, request, view):
        return request.user.has_perms(["webhooks.view_delivery", "webhooks.change_delivery"])


class DeliveryViewSet(GroupScopedMixin, viewsets.ReadOnlyModelViewSet):
    """The delivery log: every event owed to an endpoint or to the researchers' e-mail, and how it went."""

    serializer_class = DeliverySerializer

    def get_queryset(self):
        return Delivery.objects.all()

    lookup_value_regex = ID_PATH_PATTERN
    filterset_fields = ["endpoint", "channel", "event", "status"]
    ordering_fields = ["id", "created_at", "next_attempt_at"]
    ordering = ["-id"]

    @action(detail=True, methods=["post"], permission_classes=[IsAdminUser, MaySendAgain])
    def send_again(self, request, pk=None):
        """Send the delivery again from its first attempt, with the same event id."""
        delivery = self.get_object()
        send_again(deliveries=Delivery.objects.filter(pk=delivery.pk))
        delivery.refresh_from_db()
        return Response(DeliverySerializer(delivery).data)
