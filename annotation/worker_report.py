"""One worker as a researcher reviews them (issue 26): answers per stage by work state, time per
task against the stage's, gold accuracy, agreement with the other workers on the same items, and
flags for outliers with the evidence behind each.

Every number is a SQL aggregate over the worker's rows, so the page costs the same handful of
queries for ten answers or ten thousand. The flags are prompts for review, never verdicts: each
says what it saw and needs MIN_ANSWERS answers before it says anything.
"""

from dataclasses import dataclass, field

from django.db.models import (
    Avg,
    Case,
    Count,
    F,
    IntegerField,
    Min,
    OuterRef,
    Q,
    Subquery,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce

from annotation import teams
from annotation.models import (
    Assignment,
    Caption,
    GoldAnswer,
    HumanJudgement,
    InstructionSubmission,
    Side,
    Stage,
    Verification,
    WorkerReliability,
    WorkState,
)
from annotation.sql import Median, count_up_to, normalised_text
from crowdbench import shared_cache
from crowdbench.jobs import enqueue

MIN_ANSWERS = 10
# "Too fast": a median time per task below this share of the stage's median (other workers).
FAST_SHARE = 0.3
# A side or an option chosen so often that chance explains it with a probability below this.
P_VALUE = 0.001
COPIES_SHOWN = 5
# A stage's median time beside each worker's: exact, without the worker, up to this many answers.
EXACT_MEDIAN_UP_TO = 20_000
STAGE_MEDIAN_SECONDS = 10 * 60
STAGE_MEDIAN_JOB = "tasks.keep_stage_median"


@dataclass(frozen=True)
class StageRow:
    stage: str
    label: str
    provisional: int
    accepted: int
    rejected: int
    mean_seconds: float | None
    median_seconds: float | None
    stage_median_seconds: float | None
    """The median of every other worker's answers in the stage."""

    @property
    def submitted(self):
        return self.provisional + self.accepted + self.rejected


@dataclass(frozen=True)
class GoldRow:
    label: str
    answers: int
    correct: int

    @property
    def accuracy(self):
        return self.correct / self.answers


@dataclass(frozen=True)
class AgreementRow:
    """How often the worker's answer equals the majority of the other workers on the same item;
    items where the others split evenly, or nobody else answered, are not compared."""

    label: str
    answers: int
    compared: int
    agreed: int

    @property
    def share(self):
        return self.agreed / self.compared if self.compared else None


@dataclass(frozen=True)
class Flag:
    key: str
    title: str
    evidence: str
    stage: str = ""
    examples: list = field(default_factory=list)


@dataclass(frozen=True)
class ReliabilityRow:
    """A worker model's estimate of this worker (annotation/worker_models.py, stored by its job),
    beside the median of every worker it fitted: each model has its own scale."""

    stage: str
    model: str
    family: str
    reliability: float
    answers: int
    fitted_at: object
    crowd_median: float | None


@dataclass
class WorkerReport:
    worker: object
    stages: list[StageRow]
    gold: list[GoldRow]
    agreement: list[AgreementRow]
    flags: list[Flag]
    reliabilities: list[ReliabilityRow] = field(default_factory=list)


def worker_report(worker, *, user):
    """What is known of `worker` from the work `user` may see (annotation/teams.py): a worker is
    shared by every research group, the work they did for each is not, so each count, time, flag
    and copied text is of the rows of `user`'s groups, and so is every figure of the other workers
    it is compared with. Gold answers are of the qualification tests, which every group shares."""
    stages = _stages(worker, user)
    verification = _verification(worker, user)
    pairwise = _pairwise(worker, user)
    agreement = [row for row in (verification["agreement"], pairwise["agreement"]) if row.answers]
    flags = [*_too_fast(stages), *_same_side(pairwise), *_one_option(verification), *_copies(worker, user)]
    return WorkerReport(worker=worker, stages=stages, gold=_gold(worker), agreement=agreement, flags=flags,
                        reliabilities=_reliabilities(worker, user))


def _reliabilities(worker, user):
    mine = list(teams.scoped(WorkerReliability.objects.filter(worker=worker), user).select_related("family")
                .order_by("stage", "model", "family_id"))
    if not mine:
        return []
    medians = {
        (row["stage"], row["model"], row["family_id"]): row["median"]
        for row in WorkerReliability.objects.filter(
            stage__in={r.stage for r in mine}, model__in={r.model for r in mine})
        .values("stage", "model", "family_id").annotate(median=Median("reliability")).order_by()
    }
    return [ReliabilityRow(stage=row.get_stage_display(), model=row.get_model_display(),
                           family=row.family.name if row.family else "every family",
                           reliability=row.reliability, answers=row.answers, fitted_at=row.fitted_at,
                           crowd_median=medians.get((row.stage, row.model, row.family_id)))
            for row in mine]


# --- answers and time ----------------------------------------------------------------------------


def _state(state):
    return Count("pk", filter=Q(work_state=state))


def _stages(worker, user):
    labels = dict(Stage.choices)
    rows = list(
        teams.scoped(Assignment.objects.filter(worker=worker, status=Assignment.Status.SUBMITTED), user)
        .values("unit__stage")
        .annotate(provisional=_state(WorkState.PROVISIONAL), accepted=_state(WorkState.ACCEPTED),
                  rejected=_state(WorkState.REJECTED), mean=Avg("active_seconds"), median=Median("active_seconds"))
        .order_by("unit__stage")
    )
    others = {row["unit__stage"]: _others_median(row["unit__stage"], worker, user) for row in rows}
    return [
        StageRow(stage=row["unit__stage"], label=labels.get(row["unit__stage"], row["unit__stage"]),
                 provisional=row["provisional"], accepted=row["accepted"], rejected=row["rejected"],
                 mean_seconds=row["mean"], median_seconds=row["median"],
                 stage_median_seconds=others.get(row["unit__stage"]))
        for row in rows
    ]


def _others_median(stage, worker, user):
    """The median time of every other worker's answers in `stage` that `user` may see. Past
    EXACT_MEDIAN_UP_TO answers it is the whole stage's median in that scope, kept in the shared
    cache and computed again by a job once it is STAGE_MEDIAN_SECONDS old: sorting a million
    answers took 1.7 s, which every worker's page paid whenever the figure lapsed (None while the
    job computes it the first time), and one worker among so many moves the median by nothing a
    flag could see."""
    answers = _stage_answers(stage, user)
    if count_up_to(answers, EXACT_MEDIAN_UP_TO) <= EXACT_MEDIAN_UP_TO:
        return answers.exclude(worker=worker).aggregate(median=Median("active_seconds"))["median"]
    return shared_cache.kept_or_refreshed(
        _stage_median_key(stage, user),
        compute=lambda: _whole_stage_median(stage, user),
        refresh=lambda: enqueue(STAGE_MEDIAN_JOB, stage, getattr(user, "pk", None)),
        fresh_seconds=STAGE_MEDIAN_SECONDS)


def keep_stage_median(stage, user):
    """Compute the whole stage's median time in `user`'s scope and keep it (the job's work)."""
    shared_cache.keep(_stage_median_key(stage, user), _whole_stage_median(stage, user))


def _stage_answers(stage, user):
    return teams.scoped(Assignment.objects.filter(status=Assignment.Status.SUBMITTED, unit__stage=stage), user)


def _whole_stage_median(stage, user):
    return _stage_answers(stage, user).aggregate(median=Median("active_seconds"))["median"]


def _stage_median_key(stage, user):
    return f"worker-report:stage-median:{stage}:{teams.scope_key(user)}"


def _too_fast(stages):
    for row in stages:
        timed_enough = row.submitted >= MIN_ANSWERS and row.median_seconds is not None
        if timed_enough and row.stage_median_seconds and row.median_seconds < FAST_SHARE * row.stage_median_seconds:
            yield Flag(
                "too_fast", "Too fast",
                f"{row.label}: median {row.median_seconds:.0f} s per task against the stage's "
                f"{row.stage_median_seconds:.0f} s ({row.median_seconds / row.stage_median_seconds:.0%} of it; "
                f"flagged below {FAST_SHARE:.0%}), over {row.submitted} answers.",
                stage=row.stage)


# --- gold ----------------------------------------------------------------------------------------


def _gold(worker):
    labels = dict(Stage.choices)
    rows = (GoldAnswer.objects.filter(worker=worker, correct__isnull=False)
            .values("item__qualification__stage")
            .annotate(answers=Count("pk"), right=Count("pk", filter=Q(correct=True)))
            .order_by("item__qualification__stage"))
    return [GoldRow(label=labels.get(row["item__qualification__stage"], row["item__qualification__stage"]),
                    answers=row["answers"], correct=row["right"]) for row in rows]


# --- agreement with the others, and the habits a spammer shows ------------------------------------


def _others_count(model, item, condition):
    """How many other workers' answers on the same item meet `condition`; rejected work is out."""
    others = (model.objects.filter(condition, **{item: OuterRef(item)}).exclude(worker=OuterRef("worker"))
              .exclude(assignment__work_state=WorkState.REJECTED)
              .order_by().values(item).annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(others, output_field=IntegerField()), Value(0))


def _verification(worker, user):
    # Where the others hold a majority, the worker's answer set against theirs: agreement, and
    # the two ways of disagreeing that an option flag weighs against each other.
    crowd_yes, crowd_no = Q(yes__gt=F("no")), Q(no__gt=F("yes"))
    found = (
        teams.scoped(Verification.objects.filter(worker=worker), user)
        .annotate(yes=_others_count(Verification, "reference", Q(is_correct=True)),
                  no=_others_count(Verification, "reference", Q(is_correct=False)))
        .aggregate(answers=Count("pk"), compared=Count("pk", filter=~Q(yes=F("no"))),
                   agreed=Count("pk", filter=Q(is_correct=True) & crowd_yes | Q(is_correct=False) & crowd_no),
                   crowd_said_correct=Count("pk", filter=crowd_yes), crowd_said_incorrect=Count("pk", filter=crowd_no),
                   correct_where_crowd_not=Count("pk", filter=Q(is_correct=True) & crowd_no),
                   incorrect_where_crowd_not=Count("pk", filter=Q(is_correct=False) & crowd_yes))
    )
    return {**found, "agreement": AgreementRow(label=dict(Stage.choices)[Stage.VERIFICATION],
                                               answers=found["answers"], compared=found["compared"],
                                               agreed=found["agreed"])}


def _one_option(verification):
    """A lean to one option, "Correct" or "Incorrect", tested against the crowd's decisions on the
    same references, each way: of the references the other verifiers' majority called "Incorrect",
    the verifier said "Correct" of most (a binomial test at 1/2, one-sided), or the other way round.
    Not against how often the others choose it, nor by setting one kind of disagreement against the
    other: a crowd that under-says "Correct" disagrees with a careful verifier mostly one way, and
    either test flagged them; but a careful verifier agrees with the crowd on most of what it
    decides, unless the crowd is wrong on most of it. One who answers one option to everything
    contradicts it on all of the other's. Answers where the others split evenly, or nobody else
    answered, say nothing."""
    from scipy.stats import binomtest

    if verification["compared"] < MIN_ANSWERS:
        return
    leans = []
    for leaned, against, times, among in (
            ("Correct", "Incorrect", verification["correct_where_crowd_not"], verification["crowd_said_incorrect"]),
            ("Incorrect", "Correct", verification["incorrect_where_crowd_not"], verification["crowd_said_correct"])):
        if among:
            leans.append((binomtest(times, among, 0.5, alternative="greater").pvalue, leaned, against, times, among))
    if not leans or min(leans)[0] >= P_VALUE:
        return
    pvalue, leaned, against, times, among = min(leans)
    yield Flag(
        "one_option", f"Leans to “{leaned}”",
        f"Verification: said “{leaned}” of {times} of the {among} references the other verifiers' majority "
        f"called “{against}”, over {verification['compared']} answers compared with theirs; a verifier without a "
        f"lean agrees with that majority on most of them (binomial test p = {pvalue:.2g}).",
        stage=Stage.VERIFICATION)


_CHOSE_A = Q(choice=Side.LEFT, shown_left=HumanJudgement.ShownLeft.A) | Q(choice=Side.RIGHT,
                                                                         shown_left=HumanJudgement.ShownLeft.B)
_CHOSE_B = Q(choice=Side.LEFT, shown_left=HumanJudgement.ShownLeft.B) | Q(choice=Side.RIGHT,
                                                                         shown_left=HumanJudgement.ShownLeft.A)


def _pairwise(worker, user):
    # Sides are drawn per worker, so agreement is on the response chosen, not on the side clicked.
    found = (
        teams.scoped(HumanJudgement.objects.filter(worker=worker), user)
        .annotate(chose_a=Case(When(_CHOSE_A, then=Value(1)), default=Value(0), output_field=IntegerField()),
                  for_a=_others_count(HumanJudgement, "battle", _CHOSE_A),
                  for_b=_others_count(HumanJudgement, "battle", _CHOSE_B))
        .aggregate(answers=Count("pk"), left=Count("pk", filter=Q(choice=Side.LEFT)),
                   compared=Count("pk", filter=~Q(for_a=F("for_b"))),
                   agreed=Count("pk", filter=Q(chose_a=1, for_a__gt=F("for_b"))
                                | Q(chose_a=0, for_b__gt=F("for_a"))))
    )
    return {**found, "agreement": AgreementRow(label=dict(Stage.choices)[Stage.PAIRWISE],
                                               answers=found["answers"], compared=found["compared"],
                                               agreed=found["agreed"])}


def _same_side(pairwise):
    from scipy.stats import binomtest

    n, left = pairwise["answers"], pairwise["left"]
    if n < MIN_ANSWERS:
        return
    test = binomtest(left, n, 0.5)
    if test.pvalue < P_VALUE:
        side, times = ("left", left) if left * 2 > n else ("right", n - left)
        yield Flag(
            "same_side", "Always the same side",
            f"Pairwise preference: chose the {side} response {times} of {n} times ({times / n:.0%}); the sides are "
            f"drawn at random, so a fair worker is near 50% (binomial test p = {test.pvalue:.2g}).",
            stage=Stage.PAIRWISE)


# --- copies ---------------------------------------------------------------------------------------


def _copied(queryset, text_field, shown_field, stage, what):
    groups = list(
        queryset.annotate(same=normalised_text(text_field)).values("same")
        .annotate(instances=Count("instance", distinct=True), shown=Min(shown_field)).filter(instances__gt=1)
        .order_by("-instances", "same")[:COPIES_SHOWN]
    )
    if groups:
        copies = sum(group["instances"] for group in groups)
        yield Flag(
            "copies", "Answers copied across units",
            f"{dict(Stage.choices)[stage]}: the same {what} (ignoring case and spacing) for {copies} different "
            f"instances, in {len(groups)} group{'' if len(groups) == 1 else 's'}"
            + (f" (the first {COPIES_SHOWN} shown)" if len(groups) == COPIES_SHOWN else "") + ".",
            stage=stage, examples=[(group["shown"], group["instances"]) for group in groups])


def _copies(worker, user):
    # Copies within the work `user` may see: the text quoted is of their groups' instances, and a
    # caption copied onto another group's instance is none of theirs to compare.
    yield from _copied(teams.scoped(Caption.objects.filter(assignment__worker=worker), user), "texts",
                       KT("texts__0"), Stage.CAPTION, "caption")
    yield from _copied(teams.scoped(InstructionSubmission.objects.filter(assignment__worker=worker), user),
                       "instance__instruction", "instance__instruction", Stage.INSTRUCTION_GENERATION,
                       "instruction")
