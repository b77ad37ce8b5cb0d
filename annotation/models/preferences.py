"""Pairwise preference: model responses, tournaments, battles and the crowd's judgements of them
(paper §4; CHIRP C.2.2; Prometheus-Vision rubrics)."""

from django.db import models
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce, Upper

from annotation.model_checks import CheckedFields, StorableJSONField
from annotation.models.benchmark import benchmark_instances
from annotation.models.families import InstructionFamily
from annotation.models.instances import Instance
from annotation.models.work import Assignment, counted_work
from annotation.models.workers import Worker
from crowdbench.scoped_models import UniqueInEveryScope

# The verified reference takes part in battles as one more "model" (paper Table 3's
# "Human Verified GPT-4 Reference"); win-rates are measured against it.
REFERENCE_MODEL_NAME = "human-verified reference"

# CHIRP's five criteria (Appendix C.2.1), overall first: it is the forced choice of every battle.
CHIRP_CRITERIA = (
    "overall",
    "relevance_and_completeness",
    "understanding_and_reasoning",
    "hallucination",
    "detail",
)


class ModelResponse(models.Model):
    """A model's answer to an instance: a `<model name> prediction` cell of predictions.csv, or an
    answer asked of the model's endpoint (annotation/preferences/answers.py), which keeps the
    parameters it was generated with, its tokens and its cost."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="model_responses")
    model_name = models.CharField(max_length=200)
    text = models.TextField()
    imported_from = models.CharField(max_length=500, blank=True)
    parameters = StorableJSONField(default=dict, blank=True,
                                  help_text="Generation parameters, for an answer asked of an endpoint.")
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # An edit of its text in the admin changes the leaderboard (the judge report's length bias counts
    # its tokens): the fingerprint (scoring/freshness.py) reads this.
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["instance_id", "model_name"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "model_name"],
                                    name="model_response_unique"),
        ]
        # The admin's list of model names (its filter) and its search by a model's name, in any case.
        indexes = [
            models.Index(fields=["model_name"], name="model_response_model_name"),
            models.Index(Upper("model_name"), name="model_response_model_name_ci"),
        ]

    def __str__(self):
        return f"{self.model_name} on #{self.instance_id}"


class TournamentQuerySet(models.QuerySet):
    def with_progress(self):
        """Each tournament with `battle_total` and `human_total` (its human judgements), counted
        per tournament listed, each from one index, rather than by grouping every battle and
        judgement of every tournament before the list is cut to a page."""
        return self.annotate(
            battle_total=_count_per_tournament(Battle),
            human_total=_count_per_tournament(HumanJudgement),
        )


def _count_per_tournament(model):
    rows = model.objects.filter(tournament=OuterRef("pk")).order_by().values("tournament")
    # COUNT(*), not of the key: the index on the tournament alone answers it (an index-only scan).
    return Coalesce(Subquery(rows.annotate(n=Count("*")).values("n")[:1]), 0)


class Tournament(CheckedFields, UniqueInEveryScope):
    """Which battles to sample, and how the crowd judges them (paper §4; CHIRP C.2.2)."""

    class Sampling(models.TextChoices):
        UNIFORM = "uniform", "Uniform: a fixed number of random (instance, pair) battles"
        ALL_PAIRS = "all_pairs", "All pairs of models on every instance"
        K_MATCHUPS = "k_matchups", "k random pairs per instance (CHIRP)"
        ACTIVE = "active", "Active: rounds of battles where they tell the most about the ranking"

    class ImageKind(models.TextChoices):
        ALL = "all", "Single- and multi-image"
        SINGLE = "single", "Single-image only"
        MULTI = "multi", "Multi-image only"

    class Aggregation(models.TextChoices):
        """How the crowd's board weighs its judgements: each judgement as one battle of Elo and
        Bradley-Terry (as FastChat does), or, beside that board, crowd-kit's pairwise models fitted
        by the worker-model job (annotation/worker_models.py), noisy Bradley-Terry also estimating
        each worker's skill."""

        JUDGEMENTS = "judgements", "Each judgement a battle (Elo, Bradley-Terry)"
        BRADLEY_TERRY = "bradley_terry", "Also crowd-kit's Bradley-Terry over the crowd's choices"
        NOISY_BT = "noisy_bt", "Also crowd-kit's noisy Bradley-Terry, weighing workers by skill"

    name = models.CharField(max_length=200, unique=True)
    families = models.ManyToManyField(InstructionFamily, blank=True,
                                      related_name="tournaments",
                                      help_text="None chosen: every family.")
    group = models.ForeignKey("annotation.ResearchGroup", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+",
                              help_text="The research group that owns it; empty: staff outside groups.")
    image_kind = models.CharField(max_length=10, choices=ImageKind.choices, default=ImageKind.ALL)
    model_names = StorableJSONField(default=list, blank=True,
                                   help_text='A JSON list of model names; empty: every model.')
    include_reference = models.BooleanField(
        default=True, help_text="The verified reference takes part as a model.")
    sampling = models.CharField(max_length=20, choices=Sampling.choices, default=Sampling.ALL_PAIRS)
    battle_count = models.PositiveIntegerField(
        default=0, help_text="Uniform sampling: how many battles. Active sampling: the most battles in all rounds.")
    battles_per_round = models.PositiveIntegerField(
        default=50,
        help_text="Active sampling: battles per round. The first round is balanced (every model in as many battles as "
                  "the others, no pair twice while another is left); each next "
                  "round is drawn once every battle of the last has been answered, its pairs with probability "
                  "proportional to p(1 - p) times the variance of their rating difference (Bradley-Terry on "
                  "the counted judgements so far), so close and uncertain pairs are judged more.")
    matchups_per_question = models.PositiveIntegerField(default=5,
                                                        help_text="k matchups: pairs per instance.")
    judgements_per_pair = models.PositiveSmallIntegerField(
        default=5, help_text="Judgements asked per battle; with “ask until decided”, the most it may ask.")
    adaptive = models.BooleanField(
        "ask until decided", default=False,
        help_text="Stop asking for judgements of a battle once one side is clearly preferred: the "
                  "Beta-Binomial posterior that A is preferred (uniform prior) passes the threshold, or "
                  "falls below one minus it, up to the judgements per pair.")
    posterior_threshold = models.FloatField(
        default=0.95, help_text="With “ask until decided”: how sure the posterior must be (between 0.5 and 1).")
    judgement_accuracy = models.FloatField(
        null=True, blank=True,
        help_text="With “ask until decided”: how often one judgement prefers the better response (between 0.5 "
                  "and 1, e.g. 0.8). Set, the posterior is that one response is the better one, each judgement "
                  "right this often, so a lead of two judgements passes 0.9 at 0.8. Empty: the Beta-Binomial "
                  "posterior that the crowd prefers one side.")
    with_criteria = models.BooleanField(default=False,
                                        help_text="Ask CHIRP's five criteria, not only overall.")
    with_rubric = models.BooleanField(default=False,
                                      help_text="Ask Prometheus-style 1-5 scores against a rubric.")
    rubric = models.TextField(blank=True,
                              help_text="Default score rubric (description and scores 1-5).")
    lease_minutes = models.PositiveIntegerField(default=30)
    counts_provisional = models.BooleanField(
        default=True, help_text="Provisional judgements (not yet reviewed) count in the leaderboard, "
                                "agreement and snapshots. Untick to count only accepted ones.")
    seed = models.PositiveIntegerField(default=0)
    aggregation = models.CharField(max_length=20, choices=Aggregation.choices, default=Aggregation.JUDGEMENTS,
                                   help_text="How the crowd's judgements are aggregated on the leaderboard.")
    launched_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TournamentQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "tournaments"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(judgements_per_pair__gte=1),
                                   name="tournament_judgements_per_pair_positive",
                                   violation_error_message="A pair is judged at least once."),
            models.CheckConstraint(condition=Q(posterior_threshold__gt=0.5, posterior_threshold__lt=1),
                                   name="tournament_posterior_threshold_between_half_and_one",
                                   violation_error_message="The posterior threshold is between 0.5 and 1, e.g. 0.9."),
            models.CheckConstraint(condition=Q(judgement_accuracy__gt=0.5, judgement_accuracy__lt=1)
                                   | Q(judgement_accuracy__isnull=True),
                                   name="tournament_judgement_accuracy_between_half_and_one",
                                   violation_error_message=("The judgement accuracy is between 0.5 and 1, or empty to "
                                                            "ask whether the crowd prefers one side.")),
        ]

    def __str__(self):
        return self.name

    def clean(self):
        # Without a rubric the annotators' page has nothing to score against and refuses every
        # submission; a family's or an instance's rubric only overrides this default.
        from django.core.exceptions import ValidationError

        if self.adaptive and not 0.5 < self.posterior_threshold < 1:
            raise ValidationError({"posterior_threshold": "The threshold is a probability between 0.5 and 1 "
                                                          "(0.95: stop when one side is preferred with 95% "
                                                          "posterior probability)."})
        if self.judgement_accuracy is not None and not 0.5 < self.judgement_accuracy < 1:
            raise ValidationError({"judgement_accuracy": "How often a judgement is right is a probability between "
                                                         "0.5 and 1 (0.8: four judgements in five prefer the "
                                                         "better response); leave it empty for the "
                                                         "Beta-Binomial posterior."})
        names = self.model_names
        if not isinstance(names, list) or not all(isinstance(name, str) and name.strip() and name.isprintable()
                                                  for name in names):
            raise ValidationError({"model_names": "A JSON list of model names, each a text of printable characters, "
                                                  'e.g. ["llava-1.5", "otter"]; [] for every model.'})
        if len(set(names)) != len(names):
            raise ValidationError({"model_names": "A model is named twice."})
        if self.with_rubric and not self.rubric.strip():
            raise ValidationError({"rubric": "A tournament that asks for rubric scores needs a rubric: write "
                                             "the default score rubric here (what is judged, and what "
                                             "scores 1 to 5 mean), or untick “with rubric”."})

    def rubric_for(self, instance):
        """The most specific rubric: the instance's, then its family's, then the tournament's."""
        return self.rubric_finder()(instance)

    def rubric_finder(self):
        """`rubric_for` as a function of the instance, with the rubrics read once (for the many
        instances of a tournament's scores)."""
        rubrics = {(r.family_id, r.instance_id): r.text for r in self.rubrics.all()}

        def rubric_for(instance):
            return (
                rubrics.get((None, instance.pk))
                or rubrics.get((instance.family_id, None))
                or self.rubric
            )

        return rubric_for


class Rubric(CheckedFields, models.Model):
    """A score rubric for one family or one instance of a tournament (Prometheus-Vision §3)."""

    tournament = models.ForeignKey(Tournament, on_delete=models.CASCADE, related_name="rubrics")
    family = models.ForeignKey(InstructionFamily, null=True, blank=True, on_delete=models.CASCADE)
    instance = models.ForeignKey(Instance, null=True, blank=True, on_delete=models.CASCADE)
    text = models.TextField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(family__isnull=False, instance__isnull=True)
                           | Q(family__isnull=True, instance__isnull=False)),
                name="rubric_for_family_or_instance",
                violation_error_message="A rubric is for a family or for one instance: one of them, not both.",
            ),
            models.UniqueConstraint(fields=["tournament", "family"], name="rubric_family_unique"),
            models.UniqueConstraint(fields=["tournament", "instance"], name="rubric_instance_unique"),
        ]

    def __str__(self):
        return f"Rubric of {self.instance or self.family} in {self.tournament}"


class Battle(CheckedFields, models.Model):
    """Two responses to one instance, judged by the crowd and by LLM judges.

    A and B are fixed when the battle is sampled; the side each is shown on is drawn per human
    assignment and stored on the judgement.
    """

    tournament = models.ForeignKey(Tournament, on_delete=models.CASCADE, related_name="battles")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="battles")
    response_a = models.ForeignKey(ModelResponse, on_delete=models.PROTECT, related_name="+")
    response_b = models.ForeignKey(ModelResponse, on_delete=models.PROTECT, related_name="+")
    # Active sampling's round that drew it (1 for every other sampling).
    round = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["tournament", "response_a", "response_b"],
                                    name="battle_pair_unique"),
            models.CheckConstraint(condition=~Q(response_a=F("response_b")),
                                   name="battle_two_different_responses",
                                   violation_error_message="A battle compares two different responses."),
        ]

    def __str__(self):
        return f"Battle #{self.pk}: {self.response_a.model_name} vs {self.response_b.model_name}"


class Side(models.TextChoices):
    """Where a response was shown to a worker."""

    LEFT = "left", "Left (Response 1)"
    RIGHT = "right", "Right (Response 2)"


def counted_battles(battle="battle"):
    """A Q for judgements (through their `battle` path) whose battle counts: while its instance is
    in the benchmark (annotation/models/benchmark.py). An instance whose decision a review reopened, or
    discarded, or whose caption was rejected, leaves the ratings and exports with its battles until
    it is verified again."""
    return Q(**{f"{battle}__instance__in": benchmark_instances().order_by().values("pk")})


class HumanJudgementQuerySet(models.QuerySet):
    def counted(self):
        """The judgements its tournament counts: accepted, and provisional where it says so, on
        battles that count."""
        return self.filter(counted_work(provisional_counts="tournament__counts_provisional"),
                           counted_battles())


class HumanJudgement(models.Model):
    """One worker's forced choice on a battle, as they saw it: choices name the shown side."""

    class ShownLeft(models.TextChoices):
        A = "a", "Response A on the left"
        B = "b", "Response B on the left"

    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="human_judgements")
    # The battle's tournament, kept beside it so a tournament's judgements are counted from one
    # index (its progress on the dashboard and the tournament list) rather than through each of its
    # battles: 50,000 judgements took 55 ms that way, for every tournament listed. save() sets it.
    tournament = models.ForeignKey(Tournament, on_delete=models.CASCADE, related_name="human_judgements",
                                   editable=False)
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="human_judgements")
    assignment = models.OneToOneField(Assignment, on_delete=models.PROTECT,
                                      related_name="human_judgement")
    shown_left = models.CharField(max_length=1, choices=ShownLeft.choices)
    choice = models.CharField(max_length=5, choices=Side.choices)
    criteria = StorableJSONField(default=dict, blank=True,
                                help_text='CHIRP criteria, e.g. {"detail": "left"}.')
    rubric_scores = StorableJSONField(default=dict, blank=True,
                                     help_text='1-5 per shown side, e.g. {"left": 4, "right": 2}.')
    active_seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # An edit in the admin changes the leaderboard: its fingerprint (scoring/freshness.py) reads this.
    updated_at = models.DateTimeField(auto_now=True)

    objects = HumanJudgementQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["battle", "worker"],
                                    name="human_judgement_once_per_worker"),
        ]
        # One tournament's judgements in their order (the admin's list filtered by tournament).
        indexes = [models.Index(fields=["tournament", "id"], name="human_judgement_in_tournament")]

    def __str__(self):
        return f"{self.worker} on battle #{self.battle_id}"

    def save(self, *args, **kwargs):
        self.tournament_id = self.battle.tournament_id
        super().save(*args, **kwargs)

    def winner_side(self, side):
        """'model_a' or 'model_b' for a shown side."""
        on_left = "model_a" if self.shown_left == self.ShownLeft.A else "model_b"
        on_right = "model_b" if on_left == "model_a" else "model_a"
        return on_left if side == Side.LEFT else on_right
