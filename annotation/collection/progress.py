"""Reports on the collection pipeline: the paper's Table 2 and per-stage progress."""

from collections import Counter
from dataclasses import dataclass

from django.db.models import Count, F, Q
from django.utils import timezone

from annotation.collection import table2_counts
from annotation.crowdwork.queue import slots_taken
from annotation.models import (
    Assignment,
    Instance,
    InstructionFamily,
    Reference,
    Stage,
    StageConfig,
    Verification,
    WorkState,
    WorkUnit,
    counted_work,
)
from annotation.models.benchmark import benchmark_references

# --- Table 2 -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table2Column:
    """One column of Table 2: counts, and the paper's percentages derived from them."""

    references: int = 0
    correct: int = 0
    problem_in_caption: int = 0
    problem_in_response: int = 0
    verified: int = 0
    ended: int = 0

    @property
    def correct_pct(self):
        return _percent(self.correct, self.references)

    @property
    def problem_in_caption_pct(self):
        return _percent(self.problem_in_caption, self.references)

    @property
    def problem_in_response_pct(self):
        return _percent(self.problem_in_response, self.references)

    @property
    def yield_pct(self):
        return _percent(self.verified, self.ended)

    def __add__(self, other):
        return Table2Column(*(a + b for a, b in zip(_counts(self), _counts(other), strict=True)))


@dataclass(frozen=True)
class Table2:
    overall: Table2Column
    single: Table2Column
    multi: Table2Column
    family_name: str = ""
    # (what decided, references) for the references counted: votes, a worker model, a reviewer.
    decided_by: tuple = ()

    @property
    def decided_by_text(self):
        return ", ".join(f"{label} {count}" for label, count in self.decided_by)

    def columns(self):
        return (("Overall", self.overall), ("Single", self.single), ("Multi", self.multi))


def _counts(column):
    return (column.references, column.correct, column.problem_in_caption,
            column.problem_in_response, column.verified, column.ended)


def _percent(part, whole):
    return 100 * part / whole if whole else None


def table2(*, family=None, families=None, keep=True):
    """The paper's Table 2 from decided references, and the yield of verification.

    Percentages are over the references verification decided (correct or incorrect), as in the
    paper, where correct + problem in caption + problem in GPT-4 come to about 100%. The yield
    (the paper's "yield from the original candidate set") is the share of instances with a decided
    model candidate that ended with one accepted; an instance sent back for a new caption and then
    accepted counts as kept. What is counted, and how, is `table2_counts.count_from_scratch`'s; this
    sums the counts kept per family (`table2_counts.kept_counts`; `keep=False` in a read-only
    transaction). `families`: the families counted (a queryset: a user's scope, or a snapshot's
    group's families); None counts every family, for the superuser's command line only.
    """
    chosen = InstructionFamily.objects.all() if families is None else families
    if family is not None:
        chosen = chosen.filter(pk=family.pk)
    columns = {False: Table2Column(), True: Table2Column()}
    decided = Counter()
    for row in table2_counts.kept_counts(chosen, keep=keep):
        columns[row["multi"]] += Table2Column(**{name: row[name] for name in table2_counts.COUNTED})
        decided.update(row["decided_by"])
    single, multi = columns[False], columns[True]
    labels = dict(Reference.DecidedBy.choices)
    # "Not recorded" first, then what decided in the order of the values.
    decided_by = tuple((labels.get(value, "Not recorded"), decided[value])
                       for value in ["", *sorted(Reference.DecidedBy.values)] if decided[value])
    return Table2(overall=single + multi, single=single, multi=multi,
                  family_name=family.name if family is not None else "", decided_by=decided_by)


def verification_agreement(*, family):
    """Krippendorff's alpha among a family's verifiers (nominal: correct or not; units are the
    references), over the votes its verification stage counts, with the units and answers."""
    # Imported here: the scientific stack loads when a page asks for agreement, not in every web worker.
    from annotation.scoring import agreement

    counts_provisional = StageConfig.objects.filter(family=family, stage=Stage.VERIFICATION).values_list(
        "counts_provisional", flat=True).first()
    counted = counted_work(provisional_counts=True if counts_provisional is None else counts_provisional)
    # Counted per reference in the database: a row per reference, its correct and incorrect votes.
    value_counts = list(Verification.objects.filter(counted, reference__instance__family=family)
                        .values("reference_id").order_by()
                        .annotate(correct=Count("pk", filter=Q(is_correct=True)),
                                  incorrect=Count("pk", filter=Q(is_correct=False)))
                        .values_list("correct", "incorrect"))
    return agreement.nominal_alpha_of_value_counts(value_counts)


TABLE2_ROWS = (
    ("GPT-4 Correct (%)", "correct_pct"),
    ("Problem in Caption (%)", "problem_in_caption_pct"),
    ("Problem in GPT-4 (%)", "problem_in_response_pct"),
    ("References rated (n)", "references"),
    ("Yield (%)", "yield_pct"),
    ("Instances with a decided candidate (n)", "ended"),
)


def table2_rows(table):
    """Table 2 as (label, [cell per column]) with cells formatted as the paper prints them."""
    rows = []
    for label, attribute in TABLE2_ROWS:
        cells = []
        for _, column in table.columns():
            value = getattr(column, attribute)
            if value is None:
                cells.append("-")
            elif isinstance(value, float):
                cells.append(f"{value:.1f}")
            else:
                cells.append(str(value))
        rows.append((label, cells))
    return rows


def format_table2(table):
    """Table 2 as plain text, laid out as in the paper; '-' where a column has nothing yet."""
    title = "Table 2: human rating metrics"
    if table.family_name:
        title += f" for “{table.family_name}”"
    label_width = max(len(label) for label, _ in TABLE2_ROWS)
    lines = [title, "Metrics".ljust(label_width) + "".join(
        f"{name:>9}" for name, _ in table.columns()
    )]
    for label, cells in table2_rows(table):
        lines.append(label.ljust(label_width) + "".join(f"{cell:>9}" for cell in cells))
    if table.decided_by:
        lines.append(f"Decided by: {table.decided_by_text}")
    return "\n".join(lines)


# --- stage progress ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StageProgress:
    """Per-stage rows (iterate over it) and the family's instances per status.

    Each stage row is a dict: stage, label, launched, waiting, leased, done, discarded.
    """

    stages: tuple[dict, ...]
    instances: dict  # Instance.Status value -> count, in the pipeline's order

    def __iter__(self):
        return iter(self.stages)

    def instance_rows(self):
        """(label, count) per instance status, for display."""
        return [(status.label, self.instances[status.value]) for status in Instance.Status]


def stage_progress(family):
    """Where a family's crowd work stands, stage by stage, in four queries.

    waiting: open units with a free slot; leased: unexpired leases; done: units with all their
    answers; discarded: instances that went through the stage and were later discarded.
    """
    now = timezone.now()
    launched = set(
        StageConfig.objects.filter(family=family, launched_at__isnull=False)
        .values_list("stage", flat=True)
    )
    unit_rows = (
        WorkUnit.objects.filter(family=family)
        .annotate(slots_taken=slots_taken(now))
        .values("stage")
        .annotate(
            waiting=Count("pk", filter=Q(status=WorkUnit.Status.OPEN,
                                         slots_taken__lt=F("overlap"))),
            done=Count("pk", filter=Q(status=WorkUnit.Status.DONE)),
            discarded=Count("instance", filter=Q(instance__status=Instance.Status.DISCARDED),
                            distinct=True),
        )
        .order_by()
    )
    leased_rows = (
        Assignment.objects.filter(unit__family=family, status=Assignment.Status.LEASED,
                                  lease_expires_at__gt=now)
        .values("unit__stage")
        .annotate(n=Count("pk"))
        .order_by()
    )
    instance_counts = Instance.objects.filter(family=family).aggregate(
        **{status.value: Count("pk", filter=Q(status=status)) for status in Instance.Status},
        # Instruction-generation units name no instance; the instance hangs off the submission.
        written_then_discarded=Count(
            "pk", filter=Q(status=Instance.Status.DISCARDED, instruction_submission__isnull=False)
        ),
    )

    stages = {
        stage.value: {"stage": stage.value, "label": stage.label,
                      "launched": stage.value in launched,
                      "waiting": 0, "leased": 0, "done": 0, "discarded": 0}
        for stage in Stage
    }
    for row in unit_rows:
        stages[row.pop("stage")].update(row)
    for row in leased_rows:
        stages[row["unit__stage"]]["leased"] = row["n"]
    written_then_discarded = instance_counts.pop("written_then_discarded")
    stages[Stage.INSTRUCTION_GENERATION]["discarded"] = written_then_discarded
    return StageProgress(stages=tuple(stages.values()), instances=instance_counts)


# --- answers bought under ask until decided ----------------------------------------------------


@dataclass(frozen=True)
class AnswersBought:
    """What a stage's units bought (answers in, not rejected) against what a fixed overlap at the
    stage's maximum buys for the same units, in one query."""

    answers: int
    fixed_overlap_answers: int
    units: int
    open_units: int
    decided: int

    @property
    def saved_pct(self):
        return _percent(self.fixed_overlap_answers - self.answers, self.fixed_overlap_answers)

    def summary(self):
        text = f"{self.answers} answers bought of {self.fixed_overlap_answers} at a fixed overlap"
        if self.saved_pct is not None and self.answers <= self.fixed_overlap_answers:
            text += f" ({self.saved_pct:.0f}% fewer)"
        return text + f"; {self.decided} of {self.units} decided"


def _bought(units, maximum, *, decided=None):
    """`decided`: which units' items are decided; by default those no longer asking."""
    # A cancelled unit's item moved on by another path: neither way of asking would finish it.
    counts = units.exclude(status=WorkUnit.Status.CANCELLED).aggregate(
        units=Count("pk", distinct=True),
        open_units=Count("pk", filter=Q(status=WorkUnit.Status.OPEN), distinct=True),
        decided=Count("pk", filter=~Q(status=WorkUnit.Status.OPEN) if decided is None else decided, distinct=True),
        answers=Count("assignments", filter=Q(assignments__status=Assignment.Status.SUBMITTED)
                      & ~Q(assignments__work_state=WorkState.REJECTED)),
    )
    return AnswersBought(answers=counts["answers"], fixed_overlap_answers=counts["units"] * maximum,
                         units=counts["units"], open_units=counts["open_units"], decided=counts["decided"])


def answers_bought(*, family, stage):
    """A family stage's answers bought against its overlap (under ask until decided, the most it asks)."""
    config = StageConfig.objects.filter(family=family, stage=stage).first()
    units, decided = WorkUnit.objects.filter(family=family, stage=stage), None
    if stage == Stage.VERIFICATION:
        # A reference is decided by its verdict, not by its unit closing: under a worker model a
        # closed unit waits for the job, and a reference withdrawn with its rejected caption moved on
        # (like a cancelled unit's item) and is neither decided nor asked about.
        units = units.exclude(reference__verdict=Reference.Verdict.WITHDRAWN)
        decided = Q(reference__in=benchmark_references())
    return _bought(units, config.overlap if config else 1, decided=decided)


def judgements_bought(*, tournament):
    """A tournament's human judgements bought against its judgements per pair."""
    return _bought(WorkUnit.objects.filter(stage=Stage.PAIRWISE, battle__tournament=tournament),
                   tournament.judgements_per_pair)
