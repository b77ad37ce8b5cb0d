"""LLM judges over a tournament's battles: runs, the calls they paid for, and their judgements."""

from django.db import models

from annotation.model_checks import StorableJSONField
from annotation.models.preferences import Battle, Tournament, counted_battles


class JudgeRun(models.Model):
    """One LLM judge over every battle of a tournament, with its cost and progress."""

    class Mode(models.TextChoices):
        REFERENCE_FREE = "reference_free", "Text, reference-free (paper Fig. 16)"
        REFERENCE_BACKED = "reference_backed", "Text, reference-backed (paper Fig. 17)"
        VISION = "vision", "Vision, images attached (CHIRP GPT-4V)"
        PROMETHEUS = "prometheus", "Absolute 1-5 scores against a rubric (Prometheus-Vision)"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        # Between the attempts of a job that met a rate limit, an outage or a lost database.
        RETRYING = "retrying", "Retrying"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    tournament = models.ForeignKey(Tournament, on_delete=models.CASCADE, related_name="judge_runs")
    engine = models.CharField(max_length=200, help_text="The judge model, e.g. gpt-4-0613.")
    base_url_label = models.CharField(max_length=300, blank=True,
                                      help_text="Which server answered (no credentials).")
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.REFERENCE_FREE)
    # Several runs of one tournament sit side by side in the judge report; this tells whether two
    # of them asked with the same prompt texts (annotation/judging/prompts.py prompts_sha256).
    prompts_sha256 = models.CharField(max_length=64, blank=True,
                                      help_text="Fingerprint of the prompt texts of the run's mode.")
    concurrency = models.PositiveSmallIntegerField(default=0, help_text="0: JUDGE_CONCURRENCY.")
    use_batch_api = models.BooleanField(default=False)
    batch_ids = StorableJSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    total_calls = models.PositiveIntegerField(default=0)
    done_calls = models.PositiveIntegerField(default=0)
    cached_calls = models.PositiveIntegerField(default=0)
    fallback_calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0,
                                   help_text="Of the paid calls whose price is known.")
    unpriced_calls = models.PositiveIntegerField(
        default=0, help_text="Paid calls whose price is unknown (OPENAI_PRICES names none for the model).")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.engine} ({self.get_mode_display()}) on {self.tournament}"

    @property
    def judge_name(self):
        return f"{self.engine} ({self.mode})"

    @property
    def progress(self):
        return f"{self.done_calls}/{self.total_calls}"

    @property
    def cost_text(self):
        """The run's cost as every page writes it (annotation/figures.py)."""
        from annotation.figures import dollars

        return dollars(self.cost_usd, unpriced=self.unpriced_calls)


class JudgeCall(models.Model):
    """A chat completion request and its answer, keyed by the whole request: asking again is free.
    """

    request_sha256 = models.CharField(max_length=64, unique=True)
    request = StorableJSONField()
    response = StorableJSONField()
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # Null: the price of the model is unknown (OPENAI_PRICES names none), never a free call.
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    via_batch = models.BooleanField(default=False)
    # The run that paid for the answer; a run's tokens and cost are the sum of its own calls.
    run = models.ForeignKey(JudgeRun, null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="paid_calls")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.request.get('model', '?')} call {self.request_sha256[:12]}"


class JudgeJudgementQuerySet(models.QuerySet):
    def counted(self):
        """The judge's answers on battles that count (their instance verified)."""
        return self.filter(counted_battles())


class JudgeJudgement(models.Model):
    """One judge answer on a battle in one ordering (and criterion), mapped back to A/B."""

    class Ordering(models.TextChoices):
        AB = "ab", "A shown first"
        BA = "ba", "B shown first"

    class Winner(models.TextChoices):
        A = "a", "Response A"
        B = "b", "Response B"
        TIE = "tie", "Tie / undecided"

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="judgements")
    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="judgements")
    ordering = models.CharField(max_length=2, choices=Ordering.choices)
    criterion = models.CharField(max_length=40, default="overall")
    cot = models.TextField(blank=True, help_text="The judge's chain of thought, as it answered.")
    winner = models.CharField(max_length=3, choices=Winner.choices)
    used_fallback = models.BooleanField(default=False)
    refused = models.BooleanField(default=False)
    score_a = models.PositiveSmallIntegerField(null=True, blank=True)
    score_b = models.PositiveSmallIntegerField(null=True, blank=True)
    call = models.ForeignKey(JudgeCall, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    fallback_call = models.ForeignKey(JudgeCall, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    # Prometheus scores each response on its own: `call` scored A, this one scored B.
    call_b = models.ForeignKey(JudgeCall, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # An edit in the admin changes the leaderboard: its fingerprint (scoring/freshness.py) reads this.
    updated_at = models.DateTimeField(auto_now=True)

    objects = JudgeJudgementQuerySet.as_manager()

    class Meta:
        # One name in the models, the admin and the API (/api/judge-judgements/), and it says whose:
        # the crowd's are HumanJudgement.
        verbose_name = "judge judgement"
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "battle", "ordering", "criterion"],
                                    name="judgement_unique_per_ordering"),
        ]
        # One run's verdicts in their order (the admin's list filtered by run), without reading
        # every earlier run's first: 0.3 s at 1,000,000 verdicts.
        indexes = [models.Index(fields=["run", "id"], name="judge_judgement_run_order")]

    def __str__(self):
        return f"{self.run.engine} on battle #{self.battle_id} ({self.ordering}, {self.criterion})"
