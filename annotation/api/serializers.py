"""What the REST API shows of each model. Workers appear only by pseudonym."""

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation import teams
from annotation.datasets import snapshots
from annotation.models import (
    HumanJudgement,
    ImageAsset,
    Instance,
    InstructionFamily,
    JudgeJudgement,
    ResearchGroup,
    Snapshot,
    Tournament,
)
from annotation.public_urls import public_url


class FamilySerializer(serializers.ModelSerializer):
    instance_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = InstructionFamily
        fields = ["id", "name", "description", "skill_tags", "is_multi_image", "source",
                  "source_dataset", "citation", "seed_instruction", "seed_response",
                  "target_instances", "instance_count", "created_at"]


class ImageSerializer(serializers.ModelSerializer):
    url = serializers.CharField(source="display_url", read_only=True)

    class Meta:
        model = ImageAsset
        fields = ["id", "url", "width", "height", "licence", "licence_url", "author", "source_url"]


class InstanceSerializer(serializers.ModelSerializer):
    family_name = serializers.CharField(source="family.name", read_only=True)
    images = serializers.SerializerMethodField()
    caption = serializers.SerializerMethodField()

    class Meta:
        model = Instance
        fields = ["id", "family", "family_name", "instruction", "status", "images", "caption",
                  "reference_output", "public_images_metadata", "imported_from", "created_at",
                  "updated_at"]

    def get_images(self, instance) -> list[dict]:
        return ImageSerializer([link.image for link in instance.instanceimage_set.all()],
                               many=True).data

    def get_caption(self, instance) -> list[str] | None:
        return instance.current_caption.texts if instance.current_caption else None


class TournamentSerializer(serializers.ModelSerializer):
    battles_sampled = serializers.IntegerField(source="battle_total", read_only=True)
    judgement_count = serializers.IntegerField(source="human_total", read_only=True)

    class Meta:
        model = Tournament
        fields = ["id", "name", "families", "image_kind", "model_names", "include_reference",
                  "sampling", "battle_count", "battles_sampled", "judgements_per_pair", "with_criteria",
                  "with_rubric", "seed", "launched_at", "created_at", "judgement_count"]


class HumanJudgementSerializer(serializers.ModelSerializer):
    tournament = serializers.IntegerField(source="battle.tournament_id", read_only=True)
    instance = serializers.IntegerField(source="battle.instance_id", read_only=True)
    model_a = serializers.CharField(source="battle.response_a.model_name", read_only=True)
    model_b = serializers.CharField(source="battle.response_b.model_name", read_only=True)
    winner = serializers.SerializerMethodField()
    worker = serializers.CharField(source="worker.pseudonym", read_only=True)

    class Meta:
        model = HumanJudgement
        fields = ["id", "tournament", "battle", "instance", "model_a", "model_b", "shown_left",
                  "choice", "winner", "criteria", "rubric_scores", "worker", "active_seconds",
                  "created_at"]

    def get_winner(self, judgement) -> str:
        """The preferred model's name."""
        side = judgement.winner_side(judgement.choice)
        battle = judgement.battle
        return (battle.response_a if side == "model_a" else battle.response_b).model_name


class JudgeJudgementSerializer(serializers.ModelSerializer):
    engine = serializers.CharField(source="run.engine", read_only=True)
    mode = serializers.CharField(source="run.mode", read_only=True)
    tournament = serializers.IntegerField(source="run.tournament_id", read_only=True)

    class Meta:
        model = JudgeJudgement
        fields = ["id", "run", "tournament", "engine", "mode", "battle", "ordering", "criterion",
                  "winner", "cot", "used_fallback", "refused", "score_a", "score_b", "created_at"]


class SnapshotFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    path = serializers.CharField()
    table = serializers.CharField()
    format = serializers.CharField()
    rows = serializers.IntegerField()
    bytes = serializers.IntegerField()
    sha256 = serializers.CharField()
    download_url = serializers.URLField()


class SnapshotDownloadSerializer(serializers.Serializer):
    name = serializers.CharField()
    download_url = serializers.URLField()


def _download_url(serializer, snapshot, name):
    path = reverse("api:snapshot-file", kwargs={"version": snapshot.version, "name": name})
    return public_url(path, request=serializer.context.get("request"))


class SnapshotSerializer(serializers.ModelSerializer):
    created_by = serializers.StringRelatedField()
    tournaments = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    files = serializers.SerializerMethodField()
    downloads = serializers.SerializerMethodField()

    class Meta:
        model = Snapshot
        fields = ["version", "status", "progress", "progress_message", "error", "created_at",
                  "created_by", "finished_at", "note", "tournaments", "content_sha256", "files",
                  "downloads", "manifest"]
        read_only_fields = fields

    @extend_schema_field(SnapshotFileSerializer(many=True))
    def get_files(self, snapshot):
        """The data files, each with the address that downloads it (once the build is done)."""
        names = set(snapshots.downloadable_names(snapshot))
        return [{**entry, "download_url": _download_url(self, snapshot, entry["name"])}
                if entry["name"] in names else entry for entry in snapshot.files]

    @extend_schema_field(SnapshotDownloadSerializer(many=True))
    def get_downloads(self, snapshot):
        """Every file of a built snapshot (data, SHA256SUMS, manifest.json, README.md) and its
        download address; empty until the build is done."""
        return [{"name": name, "download_url": _download_url(self, snapshot, name)}
                for name in snapshots.downloadable_names(snapshot)]


class SnapshotSummarySerializer(SnapshotSerializer):
    """A snapshot as the list shows it: its files once (`downloads`), without the manifest, whose
    file list, counts and licences are the detail's (`/api/snapshots/<version>/`)."""

    class Meta(SnapshotSerializer.Meta):
        fields = [name for name in SnapshotSerializer.Meta.fields if name not in ("files", "manifest")]
        read_only_fields = fields


class SnapshotRequestSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
    tournaments = serializers.PrimaryKeyRelatedField(many=True, required=False, default=list,
                                                     queryset=Tournament.objects)
    group = serializers.PrimaryKeyRelatedField(
        required=False, allow_null=True, default=None, queryset=ResearchGroup.objects.all(),
        help_text="The research group whose families and tournaments the snapshot holds; a member of "
                  "one group may leave it out.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is None:  # the schema's generator, which reads fields only
            return
        # Another group's tournament or group is, to this caller, one that does not exist.
        self.fields["tournaments"].child_relation.queryset = teams.visible(Tournament.objects.all(), request.user)
        self.fields["group"].queryset = teams.groups_to_own(request.user)

    def validate(self, data):
        data["group"] = teams.owning_group(user=self.context["request"].user, group=data["group"])
        return data


class SnapshotDiffSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    against = serializers.IntegerField(allow_null=True)
    added = serializers.ListField(child=serializers.IntegerField())
    removed = serializers.ListField(child=serializers.IntegerField())
    changed = serializers.ListField(child=serializers.IntegerField())


class LeaderboardRowSerializer(serializers.Serializer):
    split = serializers.CharField(required=False, help_text="all-images, single-image or multi-image.")
    model = serializers.CharField()
    elo = serializers.FloatField(help_text="Online Elo, bootstrap median.")
    elo_lower = serializers.FloatField()
    elo_upper = serializers.FloatField()
    bt = serializers.FloatField(help_text="Bradley-Terry rating, Elo scale: the most probable rating under the "
                                          "board's bt_prior.")
    bt_lower = serializers.FloatField()
    bt_upper = serializers.FloatField()
    matches = serializers.IntegerField()
    few_matches = serializers.BooleanField(help_text="Fewer matches than min_matches: the Elo interval means "
                                                     "little.")
    bt_rated = serializers.BooleanField(help_text="At least min_rated_matches matches; below that the page shows "
                                                  "“not yet rated” for Bradley-Terry, as bt then says more about "
                                                  "the prior than about the model.")
    wins_vs_reference = serializers.IntegerField(allow_null=True)
    n_vs_reference = serializers.IntegerField(allow_null=True)
    win_rate_vs_reference = serializers.FloatField(allow_null=True)


class CategoryWinRateSerializer(serializers.Serializer):
    model = serializers.CharField()
    instruction_category = serializers.CharField()
    wins = serializers.IntegerField()
    ties = serializers.IntegerField()
    losses = serializers.IntegerField()
    n = serializers.IntegerField()
    win_rate = serializers.FloatField(allow_null=True, help_text="Null where n is 0.")


class MajorityAgreementSerializer(serializers.Serializer):
    strength = serializers.CharField()
    n_pairs = serializers.IntegerField()
    judge_accuracy = serializers.FloatField(allow_null=True)
    judge_ci_lower = serializers.FloatField(allow_null=True)
    judge_ci_upper = serializers.FloatField(allow_null=True)
    random_baseline = serializers.FloatField(allow_null=True)
    length_baseline = serializers.FloatField(allow_null=True)


class ContradictionSerializer(serializers.Serializer):
    questions = serializers.IntegerField(help_text="Questions with at least three models compared, where a "
                                                   "contradiction is possible.")
    contradicted = serializers.IntegerField(help_text="Of those, questions whose preferences (each pair's "
                                                      "majority) contain a cycle (CHIRP C.2.8).")
    share = serializers.FloatField(allow_null=True, help_text="contradicted / questions; null without questions.")
    three_cycles = serializers.IntegerField(help_text="Directed 3-cycles (A over B over C over A) over those "
                                                      "questions.")


class AgreementSerializer(serializers.Serializer):
    judge = serializers.CharField()
    shared = serializers.IntegerField(help_text="Battles judged by both the judge and the crowd.")
    with_majority = serializers.IntegerField(help_text="Of those, the battles whose crowd votes have a majority: "
                                                       "the accuracy's denominator.")
    accuracy = serializers.FloatField(allow_null=True, help_text="Reconstructs the crowd majority, over "
                                                                 "with_majority battles.")
    kappa = serializers.FloatField(allow_null=True, help_text="Cohen's kappa (CHIRP C.2.5).")
    spearman = serializers.FloatField(allow_null=True, help_text="Spearman of the two Elo rankings, as the "
                                                                 "boards show them (bootstrap, All images).")
    judge_contradictions = ContradictionSerializer(help_text="The judge's verdicts on every battle it judged.")
    human_contradictions = ContradictionSerializer(help_text="The crowd's judgements on every battle they judged.")
    majority = MajorityAgreementSerializer(many=True)


class AlphaSerializer(serializers.Serializer):
    alpha = serializers.FloatField(allow_null=True, help_text="Krippendorff's alpha, nominal; null with no unit "
                                                              "answered twice, or one value throughout.")
    units = serializers.IntegerField(help_text="Units with two or more answers (battles, references).")
    answers = serializers.IntegerField(help_text="Answers on those units.")


class RubricScoreSerializer(serializers.Serializer):
    rubric = serializers.CharField(help_text="The rubric's criterion (its first line), or “All rubrics”.")
    model = serializers.CharField()
    mean = serializers.FloatField(help_text="Mean 1-5 score over responses, each response's scores "
                                            "averaged first.")
    lower = serializers.FloatField(allow_null=True, help_text="95% Student's t interval over responses, "
                                                              "kept within 1-5; null below two responses "
                                                              "or when every response got the same mean.")
    upper = serializers.FloatField(allow_null=True)
    responses = serializers.IntegerField(help_text="Responses scored (one model's answer to one instance).")
    scores = serializers.IntegerField(help_text="Scores given (a response scored by several workers, or "
                                                "in several battles, has several).")


class RubricCorrelationSerializer(serializers.Serializer):
    judge = serializers.CharField()
    n = serializers.IntegerField(help_text="Responses scored by both the judge and the crowd.")
    pearson = serializers.FloatField(allow_null=True, help_text="Null below 3 responses or with constant scores.")
    kendall = serializers.FloatField(allow_null=True)
    spearman = serializers.FloatField(allow_null=True)


class BradleyTerryPriorSerializer(serializers.Serializer):
    distribution = serializers.CharField(help_text="“normal”: a Gaussian prior on every rating.")
    mean = serializers.FloatField(help_text="Its mean, Elo points (the initial rating).")
    sd = serializers.FloatField(help_text="Its standard deviation, Elo points.")


class WorkerModelScoreSerializer(serializers.Serializer):
    model = serializers.CharField()
    score = serializers.FloatField(help_text="crowd-kit's score of the model, 0 to 1.")


class LeaderboardPendingSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["computing"])
    detail = serializers.CharField()


class LeaderboardSerializer(serializers.Serializer):
    key = serializers.CharField()
    title = serializers.CharField()
    battles = serializers.IntegerField(help_text="Distinct battles judged.")
    judgements = serializers.IntegerField(help_text="Judgements over those battles (workers, or orderings).")
    aggregation = serializers.CharField(
        help_text="How the board's judgements were aggregated: each judgement a battle (Elo, Bradley-Terry), a "
                  "judge's two orderings combined by the VisIT-Bench tie rule, or one of crowd-kit's pairwise "
                  "worker models (the tournament's aggregation), whose scores are then in worker_model_scores "
                  "and its rows empty.")
    worker_model_scores = WorkerModelScoreSerializer(
        many=True, help_text="A crowd-kit board's score per model, best first; empty on every other board.")
    worker_model_warning = serializers.CharField(
        help_text="Why a crowd-kit board has no scores although judgements are in (its fit did not settle), "
                  "or empty.")
    rounds = serializers.IntegerField()
    data_key = serializers.CharField(help_text="sha256 of the judgements the result was computed from.")
    computed_at = serializers.DateTimeField()
    status = serializers.ChoiceField(
        choices=["current", "computing"],
        help_text="current: computed from the judgements as they are now; computing: the judgements have "
                  "changed since, and a newer result is being computed in the background (or queued).")
    age_seconds = serializers.FloatField(help_text="Seconds since the result was computed.")
    computed_from = serializers.IntegerField(help_text="Human and judge judgements the result was computed from.")
    min_matches = serializers.IntegerField()
    bt_prior = BradleyTerryPriorSerializer(help_text="The prior of the Bradley-Terry ratings (a maximum a "
                                                     "posteriori fit): a model that won or lost every match "
                                                     "still gets a finite rating.")
    min_rated_matches = serializers.IntegerField(help_text="Matches below which a model's Bradley-Terry rating "
                                                           "is shown as not yet rated (rows' bt_rated).")
    rows = LeaderboardRowSerializer(many=True)
    categories = CategoryWinRateSerializer(many=True)
    agreement = AgreementSerializer(allow_null=True, help_text="This judge against the crowd; null for the crowd.")
    alpha = AlphaSerializer(allow_null=True, help_text="Krippendorff's alpha among the crowd's judgements of this "
                                                       "criterion (units: battles; value: the response chosen); "
                                                       "null for a judge.")
    rubric_scores = RubricScoreSerializer(
        many=True, help_text="This evaluator's 1-5 rubric scores per model, over every rubric and per "
                             "criterion; empty when it gave none (the crowd of a tournament without a "
                             "rubric, a judge other than Prometheus).")
    rubric_criteria = serializers.ListField(child=serializers.CharField(),
                                            help_text="The criteria of the rubrics scored against.")
    rubric_correlation = serializers.FloatField(
        allow_null=True,
        help_text="Spearman's rho between the models' mean rubric score (All rubrics) and their Elo on "
                  "this board (All images). A number whenever 3 or more models have both; null with "
                  "fewer, or when the mean scores or the ratings are all equal (no order to correlate).")
    rubric_models = serializers.IntegerField(help_text="Models with both a rubric score and an Elo.")
    rubric_vs_crowd = RubricCorrelationSerializer(
        allow_null=True, help_text="This judge's 1-5 rubric scores against the crowd's, response by response "
                                   "(Prometheus-Vision §5); null for the crowd, or without rubric scores on "
                                   "both sides.")
    judge_report = serializers.JSONField(
        allow_null=True,
        help_text="This evaluator's row of the judge report (the dashboard's table): for a judge run its "
                  "engine, mode, prompts_sha256, cost_usd (of the calls with a known price) and "
                  "unpriced_calls, position (first_position_wins, flips), length "
                  "(longer_wins and bins by tokens longer), self_preference (by_judge, by_crowd), majority "
                  "by strength, kappa_by_category and spearman; for the crowd its length. Every rate is "
                  "{rate, lower, upper, n} with a 95% Wilson interval.")
