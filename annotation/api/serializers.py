"""What the REST API shows of each model. Workers appear only by pseudonym."""

from rest_framework import serializers

from annotation.models import (
    HumanJudgement,
    ImageAsset,
    Instance,
    InstructionFamily,
    Judgement,
    PreferenceStudy,
    Snapshot,
)


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


class StudySerializer(serializers.ModelSerializer):
    battles_sampled = serializers.IntegerField(read_only=True)
    judgement_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = PreferenceStudy
        fields = ["id", "name", "families", "image_kind", "model_names", "include_reference",
                  "sampling", "battle_count", "battles_sampled", "judgements_per_pair", "with_criteria",
                  "with_rubric", "seed", "launched_at", "created_at", "judgement_count"]


class HumanJudgementSerializer(serializers.ModelSerializer):
    study = serializers.IntegerField(source="battle.study_id", read_only=True)
    instance = serializers.IntegerField(source="battle.instance_id", read_only=True)
    model_a = serializers.CharField(source="battle.response_a.model_name", read_only=True)
    model_b = serializers.CharField(source="battle.response_b.model_name", read_only=True)
    winner = serializers.SerializerMethodField()
    worker = serializers.CharField(source="worker.pseudonym", read_only=True)

    class Meta:
        model = HumanJudgement
        fields = ["id", "study", "battle", "instance", "model_a", "model_b", "shown_left",
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
    study = serializers.IntegerField(source="run.study_id", read_only=True)

    class Meta:
        model = Judgement
        fields = ["id", "run", "study", "engine", "mode", "battle", "ordering", "criterion",
                  "winner", "cot", "used_fallback", "refused", "score_a", "score_b", "created_at"]


class SnapshotSerializer(serializers.ModelSerializer):
    created_by = serializers.StringRelatedField()
    studies = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = Snapshot
        fields = ["version", "status", "progress", "progress_message", "error", "created_at",
                  "created_by", "finished_at", "note", "studies", "content_sha256", "files",
                  "manifest"]
        read_only_fields = fields


class SnapshotRequestSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
    studies = serializers.PrimaryKeyRelatedField(many=True, required=False, default=list,
                                                 queryset=PreferenceStudy.objects.all())


class SnapshotDiffSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    against = serializers.IntegerField(allow_null=True)
    added = serializers.ListField(child=serializers.IntegerField())
    removed = serializers.ListField(child=serializers.IntegerField())
    changed = serializers.ListField(child=serializers.IntegerField())


class LeaderboardRowSerializer(serializers.Serializer):
    split = serializers.CharField(required=False)
    model = serializers.CharField()
    elo = serializers.FloatField()
    elo_lower = serializers.FloatField()
    elo_upper = serializers.FloatField()
    matches = serializers.IntegerField()
    wins_vs_reference = serializers.IntegerField(allow_null=True)
    n_vs_reference = serializers.IntegerField(allow_null=True)
    win_rate_vs_reference = serializers.FloatField(allow_null=True)


class LeaderboardSerializer(serializers.Serializer):
    key = serializers.CharField()
    title = serializers.CharField()
    battles = serializers.IntegerField()
    rows = LeaderboardRowSerializer(many=True)
