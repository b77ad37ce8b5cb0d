"""The researchers' REST API: read-only over the pipeline's data; snapshots may be requested.

Every endpoint needs a staff user (a DRF token, or an admin session for the browsable API and
Swagger UI); the defaults live in settings.REST_FRAMEWORK.
"""

import math

import django_filters
from django.db.models import Count, Prefetch, Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from annotation import leaderboard, snapshots
from annotation.api import serializers
from annotation.exceptions import AnnotationError
from annotation.models import (
    CHIRP_CRITERIA,
    HumanJudgement,
    Instance,
    InstanceImage,
    InstructionFamily,
    Judgement,
    PreferenceStudy,
    Snapshot,
    multi_image_q,
)

MAX_LEADERBOARD_ROUNDS = 1000
DEFAULT_LEADERBOARD_ROUNDS = 200


class FamilyFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = InstructionFamily
        fields = ["name", "source", "is_multi_image", "source_dataset"]


class FamilyViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.FamilySerializer
    filterset_class = FamilyFilter
    ordering_fields = ["name", "created_at", "instance_count"]
    ordering = ["name"]

    def get_queryset(self):
        return InstructionFamily.objects.annotate(instance_count=Count("instances"))


class InstanceFilter(django_filters.FilterSet):
    family_name = django_filters.CharFilter(field_name="family__name")
    is_multi_image = django_filters.BooleanFilter(method="filter_multi_image")
    instruction = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Instance
        fields = ["family", "family_name", "status", "imported_from", "instruction"]

    def filter_multi_image(self, queryset, name, value):
        multi = multi_image_q()
        return queryset.filter(multi) if value else queryset.exclude(multi)


class InstanceViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.InstanceSerializer
    filterset_class = InstanceFilter
    ordering_fields = ["id", "created_at", "updated_at"]
    ordering = ["id"]
    queryset = Instance.objects.select_related("family", "current_caption").prefetch_related(
        Prefetch("instanceimage_set", queryset=InstanceImage.objects.select_related("image"))
    )


class StudyViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.StudySerializer
    filterset_fields = ["sampling", "image_kind", "with_criteria", "with_rubric"]
    ordering_fields = ["id", "name", "created_at"]
    ordering = ["-created_at", "-id"]

    def get_queryset(self):
        return PreferenceStudy.objects.prefetch_related("families").annotate(
            battles_sampled=Count("battles", distinct=True),
            judgement_count=Count("battles__human_judgements", distinct=True),
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("criterion", str, enum=list(CHIRP_CRITERIA), default="overall"),
            OpenApiParameter("rounds", int, description=f"Bootstrap rounds, 1 to "
                                                        f"{MAX_LEADERBOARD_ROUNDS}.",
                             default=DEFAULT_LEADERBOARD_ROUNDS),
        ],
        responses=serializers.LeaderboardSerializer(many=True),
    )
    @action(detail=True, pagination_class=None, filter_backends=[])
    def leaderboard(self, request, pk=None):
        """VisIT-Bench Tables 3-4 for the crowd and each finished LLM judge of the study."""
        study = self.get_object()
        criterion = request.query_params.get("criterion", "overall")
        if criterion not in CHIRP_CRITERIA:
            raise ValidationError({"criterion": f"One of {', '.join(CHIRP_CRITERIA)}."})
        try:
            rounds = int(request.query_params.get("rounds", DEFAULT_LEADERBOARD_ROUNDS))
        except ValueError:
            raise ValidationError({"rounds": "A whole number."}) from None
        if not 1 <= rounds <= MAX_LEADERBOARD_ROUNDS:
            raise ValidationError({"rounds": f"From 1 to {MAX_LEADERBOARD_ROUNDS}."})
        boards = leaderboard.study_leaderboards(study=study, criterion=criterion, rounds=rounds)
        data = [
            {"key": board.key, "title": board.title, "battles": len(board.battles),
             "rows": _records(board.table)}
            for board in boards
        ]
        return Response(serializers.LeaderboardSerializer(data, many=True).data)


def _records(table):
    if table is None:
        return []
    rows = []
    for record in table.to_dict(orient="records"):
        rows.append({key: _plain(value) for key, value in record.items()})
    return rows


def _plain(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    try:
        if value != value:  # pandas' NA
            return None
    except TypeError:
        return None
    return value


class HumanJudgementFilter(django_filters.FilterSet):
    study = django_filters.NumberFilter(field_name="battle__study")
    instance = django_filters.NumberFilter(field_name="battle__instance")
    model = django_filters.CharFilter(method="filter_model", label="Either side's model name")

    class Meta:
        model = HumanJudgement
        fields = ["study", "battle", "instance", "choice", "shown_left", "model"]

    def filter_model(self, queryset, name, value):
        return queryset.filter(Q(battle__response_a__model_name=value)
                               | Q(battle__response_b__model_name=value))


class HumanJudgementViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.HumanJudgementSerializer
    filterset_class = HumanJudgementFilter
    ordering_fields = ["id", "created_at", "active_seconds"]
    ordering = ["id"]
    queryset = HumanJudgement.objects.select_related(
        "worker", "battle__response_a", "battle__response_b"
    )


class JudgeJudgementFilter(django_filters.FilterSet):
    study = django_filters.NumberFilter(field_name="run__study")

    class Meta:
        model = Judgement
        fields = ["study", "run", "battle", "criterion", "ordering", "winner"]


class JudgeJudgementViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.JudgeJudgementSerializer
    filterset_class = JudgeJudgementFilter
    ordering_fields = ["id", "created_at"]
    ordering = ["id"]
    queryset = Judgement.objects.select_related("run")


class SnapshotViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Snapshots by version; POST requests a new one, built in the background (202)."""

    serializer_class = serializers.SnapshotSerializer
    filterset_fields = ["status"]
    ordering_fields = ["version", "created_at"]
    ordering = ["-version"]
    lookup_field = "version"
    lookup_value_regex = r"[0-9]{1,9}"
    queryset = Snapshot.objects.select_related("created_by").prefetch_related("studies")

    @extend_schema(request=serializers.SnapshotRequestSerializer,
                   responses={202: serializers.SnapshotSerializer})
    def create(self, request, *args, **kwargs):
        form = serializers.SnapshotRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        snapshot = snapshots.request_snapshot(created_by=request.user,
                                              studies=form.validated_data["studies"],
                                              note=form.validated_data["note"])
        return Response(self.get_serializer(snapshot).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[OpenApiParameter("against", OpenApiTypes.INT,
                                     description="The older version (default: the previous).")],
        responses=serializers.SnapshotDiffSerializer,
    )
    @action(detail=True, pagination_class=None, filter_backends=[])
    def diff(self, request, version=None):
        """Instances added, removed and changed since another snapshot."""
        new = self.get_object()
        old = None
        against = request.query_params.get("against")
        if against is not None:
            if not against.isdigit():
                raise ValidationError({"against": "A snapshot version."})
            old = Snapshot.objects.filter(version=int(against)).first()
            if old is None:
                raise NotFound(f"No snapshot v{against}.")
        try:
            diff = snapshots.diff_snapshots(new=new, old=old)
        except AnnotationError as error:
            raise ValidationError({"detail": str(error)}) from None
        return Response(serializers.SnapshotDiffSerializer({
            "version": new.version, "against": diff.old.version if diff.old else None,
            "added": diff.added, "removed": diff.removed, "changed": diff.changed,
        }).data)
