"""The researchers' REST API: read-only over the pipeline's data; snapshots may be requested.

Every endpoint needs a staff user (a DRF token, or an admin session for the browsable API and
Swagger UI) with the model permissions the admin would ask for (annotation/api/permissions.py);
errors a client caused become 400s in annotation/api/exceptions.py. The defaults live in
settings.REST_FRAMEWORK.
"""

import django_filters
from django.db.models import Count, Prefetch, Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from annotation import scoring, teams
from annotation.api import serializers
from annotation.api.filters import FilterSet
from annotation.api.numbers import ID_PATH_PATTERN, IdFilter, query_number
from annotation.collection import progress
from annotation.datasets import downloads, manifest, snapshots
from annotation.models import (
    CHIRP_CRITERIA,
    HumanJudgement,
    Instance,
    InstanceImage,
    InstructionFamily,
    JudgeJudgement,
    Snapshot,
    Tournament,
    multi_image_q,
)
from annotation.models.benchmark import benchmark_instances
from annotation.scoring import freshness

MAX_LEADERBOARD_ROUNDS = 1000
DEFAULT_LEADERBOARD_ROUNDS = scoring.DEFAULT_ROUNDS
# A first leaderboard of a few thousand judgements takes seconds to compute.
LEADERBOARD_RETRY_AFTER_SECONDS = 10
MAX_SNAPSHOT_VERSION = 999_999_999
_SNAPSHOT_VERSION_PATTERN = r"[0-9]{1,9}"


class GroupScopedMixin:
    """Rows of the caller's research groups only, reached by the path annotation/teams.py's
    GROUP_PATHS names for the model."""

    def filter_queryset(self, queryset):
        # Here rather than in get_queryset, which viewsets override: every list, detail and action
        # filters through this.
        path = teams.owned_path(queryset.model)
        return super().filter_queryset(teams.visible(queryset, self.request.user, via=path))


class ReadOnlyViewSet(GroupScopedMixin, viewsets.ReadOnlyModelViewSet):
    # A detail id is ASCII digits: the database would read "/api/families/%201/" as row 1.
    lookup_value_regex = ID_PATH_PATTERN


class FamilyFilter(FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = InstructionFamily
        fields = ["name", "source", "is_multi_image", "source_dataset"]


class FamilyViewSet(ReadOnlyViewSet):
    serializer_class = serializers.FamilySerializer
    filterset_class = FamilyFilter
    ordering_fields = ["name", "created_at", "instance_count"]
    ordering = ["name"]

    def get_queryset(self):
        return InstructionFamily.objects.annotate(instance_count=Count("instances"))

    @extend_schema(responses=serializers.AlphaSerializer)
    @action(detail=True, pagination_class=None, filter_backends=[])
    def agreement(self, request, pk=None, format=None):
        """Krippendorff's alpha among the family's verifiers (nominal: correct or not; units: references),
        over the votes its verification stage counts."""
        found = progress.verification_agreement(family=self.get_object())
        return Response(serializers.AlphaSerializer(found._asdict()).data)


class InstanceFilter(FilterSet):
    family_name = django_filters.CharFilter(field_name="family__name")
    is_multi_image = django_filters.BooleanFilter(method="filter_multi_image")
    instruction = django_filters.CharFilter(lookup_expr="icontains")
    in_benchmark = django_filters.BooleanFilter(method="filter_in_benchmark")

    class Meta:
        model = Instance
        fields = ["family", "family_name", "status", "imported_from", "instruction"]

    def filter_multi_image(self, queryset, name, value):
        multi = multi_image_q()
        return queryset.filter(multi) if value else queryset.exclude(multi)

    def filter_in_benchmark(self, queryset, name, value):
        inside = Q(pk__in=benchmark_instances().values("pk"))
        return queryset.filter(inside) if value else queryset.exclude(inside)


class InstanceViewSet(ReadOnlyViewSet):
    serializer_class = serializers.InstanceSerializer
    filterset_class = InstanceFilter
    ordering_fields = ["id", "created_at", "updated_at"]
    ordering = ["id"]

    def get_queryset(self):
        return Instance.objects.select_related("family", "current_caption").prefetch_related(
            Prefetch("instanceimage_set", queryset=InstanceImage.objects.select_related("image"))
        )


class TournamentViewSet(ReadOnlyViewSet):
    serializer_class = serializers.TournamentSerializer
    filterset_fields = ["sampling", "image_kind", "with_criteria", "with_rubric"]
    ordering_fields = ["id", "name", "created_at"]
    ordering = ["-created_at", "-id"]

    def get_queryset(self):
        return Tournament.objects.prefetch_related("families").with_progress()

    @extend_schema(
        parameters=[
            OpenApiParameter("criterion", str, enum=list(CHIRP_CRITERIA), default="overall"),
            OpenApiParameter("rounds", int, description=f"Bootstrap rounds, 1 to {MAX_LEADERBOARD_ROUNDS}; "
                                                        "the default is the dashboard's, whose stored result "
                                                        "is returned.",
                             default=DEFAULT_LEADERBOARD_ROUNDS),
        ],
        responses={200: serializers.LeaderboardSerializer(many=True),
                   202: serializers.LeaderboardPendingSerializer},
    )
    @action(detail=True, pagination_class=None, filter_backends=[])
    def leaderboard(self, request, pk=None, format=None):
        """VisIT-Bench Tables 3-4 for the crowd and each finished LLM judge of the tournament, with each
        judge's agreement with the crowd: the same stored computation the dashboard shows.

        The leaderboard is computed by a background job, never in this request. 200: the last stored
        result, each board with its `status` ("current", or "computing" while the judgements have
        changed since and a newer result is under way or queued), `computed_at`, `age_seconds` and
        `computed_from` (judgements). 202: nothing is stored yet for this criterion and number of
        rounds; its computation is queued, ask again after `Retry-After` seconds."""
        tournament = self.get_object()
        criterion = request.query_params.get("criterion", "overall")
        if criterion not in CHIRP_CRITERIA:
            raise ValidationError({"criterion": f"One of {', '.join(CHIRP_CRITERIA)}."})
        rounds = query_number(request, "rounds", default=DEFAULT_LEADERBOARD_ROUNDS,
                              maximum=MAX_LEADERBOARD_ROUNDS)
        state = freshness.leaderboard_state(tournament=tournament, criterion=criterion, rounds=rounds)
        if state.stored is None:
            pending = {"status": state.status, "detail": "The leaderboard is being computed in the background; "
                                                         "ask again in a moment."}
            return Response(serializers.LeaderboardPendingSerializer(pending).data, status=202,
                            headers={"Retry-After": str(LEADERBOARD_RETRY_AFTER_SECONDS)})
        # The scientific stack loads here, in the request that reads a stored result, and stays out
        # of web workers that never serve a leaderboard.
        from annotation.scoring import leaderboard_display

        result = state.result
        data = [
            {"key": board.key, "title": board.title, "battles": board.battles, "judgements": board.judgements,
             "aggregation": board.aggregation, "worker_model_scores": board.worker_model_scores,
             "worker_model_warning": board.worker_model_warning,
             "rounds": result.rounds, "data_key": result.data_key, "computed_at": result.computed_at,
             "status": state.status, "age_seconds": state.age_seconds, "computed_from": result.judgements,
             "min_matches": scoring.MIN_MATCHES,
             "bt_prior": result.bt_prior, "min_rated_matches": result.min_rated_matches,
             "rows": [{**row, "few_matches": row["matches"] < scoring.MIN_MATCHES,
                       "bt_rated": leaderboard_display.bt_rated(row)} for row in board.rows],
             "categories": board.categories, "agreement": result.agreement(board.key),
             "alpha": result.crowd_alpha if board.key == scoring.HUMAN_KEY else None,
             "rubric_scores": board.rubric_scores, "rubric_criteria": board.rubric_criteria,
             "rubric_correlation": board.rubric_correlation,
             "rubric_models": board.rubric_models,
             "rubric_vs_crowd": result.rubric_vs_crowd(board.key),
             "judge_report": result.judge_report_row(board.key)}
            for board in result.boards
        ]
        return Response(serializers.LeaderboardSerializer(data, many=True).data)


class HumanJudgementFilter(FilterSet):
    tournament = IdFilter(field_name="tournament")
    instance = IdFilter(field_name="battle__instance")
    model = django_filters.CharFilter(method="filter_model", label="Either side's model name")

    class Meta:
        model = HumanJudgement
        fields = ["tournament", "battle", "instance", "choice", "shown_left", "model"]

    def filter_model(self, queryset, name, value):
        return queryset.filter(Q(battle__response_a__model_name=value)
                               | Q(battle__response_b__model_name=value))


class HumanJudgementViewSet(ReadOnlyViewSet):
    serializer_class = serializers.HumanJudgementSerializer
    filterset_class = HumanJudgementFilter
    ordering_fields = ["id", "created_at", "active_seconds"]
    ordering = ["id"]

    def get_queryset(self):
        return HumanJudgement.objects.select_related("worker", "battle__response_a", "battle__response_b")


class JudgeJudgementFilter(FilterSet):
    tournament = IdFilter(field_name="run__tournament")

    class Meta:
        model = JudgeJudgement
        fields = ["tournament", "run", "battle", "criterion", "ordering", "winner"]


class JudgeJudgementViewSet(ReadOnlyViewSet):
    serializer_class = serializers.JudgeJudgementSerializer
    filterset_class = JudgeJudgementFilter
    ordering_fields = ["id", "created_at"]
    ordering = ["id"]

    def get_queryset(self):
        return JudgeJudgement.objects.select_related("run")


class SnapshotViewSet(GroupScopedMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Snapshots by version; POST requests a new one, built in the background (202)."""

    serializer_class = serializers.SnapshotSerializer
    filterset_fields = ["status"]
    ordering_fields = ["version", "created_at"]
    ordering = ["-version"]
    lookup_field = "version"
    lookup_value_regex = _SNAPSHOT_VERSION_PATTERN

    def get_queryset(self):
        snapshots = Snapshot.objects.select_related("created_by").prefetch_related("tournaments")
        return snapshots.defer("manifest") if self.action == "list" else snapshots

    def get_serializer_class(self):
        return serializers.SnapshotSummarySerializer if self.action == "list" else serializers.SnapshotSerializer

    @extend_schema(request=serializers.SnapshotRequestSerializer,
                   responses={202: serializers.SnapshotSerializer})
    def create(self, request, *args, **kwargs):
        form = serializers.SnapshotRequestSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        snapshot = snapshots.request_snapshot(created_by=request.user,
                                              tournaments=form.validated_data["tournaments"],
                                              note=form.validated_data["note"],
                                              group=form.validated_data["group"])
        return Response(self.get_serializer(snapshot).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    @action(detail=True, url_path=r"files/(?P<name>[A-Za-z0-9_./-]{1,200})", pagination_class=None,
            filter_backends=[])
    def file(self, request, version=None, name=None):
        """One file of a built snapshot (its `files[].download_url`), for staff allowed to view
        snapshots."""
        if not downloads.may_download(request.user):
            raise PermissionDenied("You may not download snapshots.")
        snapshot = self.get_object()
        reason = downloads.withheld(snapshot, request.user)
        if reason:
            raise PermissionDenied(reason)
        return downloads.file_response(snapshot=snapshot, name=name)

    @extend_schema(
        parameters=[OpenApiParameter("against", OpenApiTypes.INT,
                                     description="The older version (default: the previous).")],
        responses=serializers.SnapshotDiffSerializer,
    )
    @action(detail=True, pagination_class=None, filter_backends=[])
    def diff(self, request, version=None, format=None):
        """Instances added, removed and changed since another snapshot."""
        new = self.get_object()
        old = None
        against = query_number(request, "against", default=None, maximum=MAX_SNAPSHOT_VERSION)
        if against is not None:
            old = teams.visible(Snapshot.objects.all(), request.user).filter(version=against).first()
            if old is None:
                raise NotFound(f"No snapshot v{against}.")
        diff = manifest.diff_snapshots(new=new, old=old)
        return Response(serializers.SnapshotDiffSerializer({
            "version": new.version, "against": diff.old.version if diff.old else None,
            "added": diff.added, "removed": diff.removed, "changed": diff.changed,
        }).data)
