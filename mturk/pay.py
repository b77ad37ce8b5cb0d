"""Pay planned from measured work time to a target hourly wage, with the platform's fees as the
platform bills them.

The paper paid $18/h (§2.2); CHIRP $0.10 per minute (C.2.2). Most platforms charge a share of a
batch's rewards and bonuses, rounded once, and the share depends on the account (academic or not);
PLATFORM_FEE_RATES_JSON sets yours, and until it does the plan uses the rate the platform publishes
for academics and says that it assumed it. A platform that bills each assignment on its own rules
says so in its backend (mturk/platforms/, `per_assignment_fee`). `billing` is the one place that
asks which platform bills which way; plans, batch costs and committed spend all ask it.
"""

import statistics
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from django.conf import settings
from django.db.models import F, Q

from annotation.models import Assignment, Stage, StageConfig, Tournament, Worker
from mturk.money import CENT, cents

MIN_MEASUREMENTS = 5


@dataclass(frozen=True)
class FeeRate:
    """A platform's share of rewards and bonuses, and where that number came from."""

    rate: Decimal
    source: str  # "configured", "assumed" or "none"
    what: str  # whose rate it is, for people
    #: Why the assumed rate is the one assumed (the platform's published rate for academics).
    reason: str = ""

    @property
    def note(self):
        percent = f"{self.rate * 100:.1f}%"
        if self.source == "configured":
            return f"{self.what} {percent} from PLATFORM_FEE_RATES_JSON"
        if self.source == "assumed":
            return (f"{self.what} {percent}, assumed: {self.reason}; set "
                    "PLATFORM_FEE_RATES_JSON to your account's rate")
        return f"no platform fee ({self.what})"


def fee_rate(platform):
    """The fee rate of a platform billing a share of the batch."""
    from mturk.platforms import backend_class

    backend = backend_class(platform)
    if backend.assumed_fee_rate is not None:
        what = backend.label
    else:
        what = Worker.Platform(platform).label if platform in Worker.Platform.values else platform
    if platform in settings.PLATFORM_FEE_RATES:
        return FeeRate(Decimal(str(settings.PLATFORM_FEE_RATES[platform])), "configured", what)
    if backend.assumed_fee_rate is not None:
        return FeeRate(backend.assumed_fee_rate, "assumed", what, backend.assumed_fee_reason)
    return FeeRate(Decimal("0"), "none", what)


@dataclass(frozen=True)
class BatchFee:
    """Prolific and CloudResearch Connect bill a share of what a batch pays its participants:
    Connect's total cost "is whatever payments you make to participants plus 25%" (its Project
    Cost page), and Prolific quotes a study's cost from its reward and its places together, with
    the account's fee and VAT (its API's calculate-study-cost). So the fee is the rate times the
    batch's total reward, rounded once to the cent: 25% of 100 × $0.33 is $8.25, where rounding
    each participant's $0.0825 first would make it $8.00. A bonus is paid by its own call, so it
    is its own batch."""

    rate: FeeRate
    per_assignment = False

    @property
    def note(self):
        return self.rate.note

    def fees(self, *, reward, assignments_per_task, tasks):
        return cents(Decimal(reward) * assignments_per_task * tasks * self.rate.rate)

    def bonus_fee(self, amount):
        return cents(Decimal(amount) * self.rate.rate)

    def rule(self, assignments_per_task):
        if self.rate.source == "none":
            return f"{self.rate.what}: no platform fee"
        return f"{self.rate.what}: {self.rate.rate * 100:.1f}% of the batch's rewards, rounded once to the cent"


def billing(platform):
    """How `platform` turns rewards and bonuses into its fees: the one place that asks."""
    from mturk.platforms import backend_class

    per_assignment = backend_class(platform).per_assignment_fee
    return per_assignment if per_assignment is not None else BatchFee(fee_rate(platform))


def reward_for(*, seconds, hourly_wage):
    """The reward, rounded up to the cent, that pays `hourly_wage` for `seconds` of work."""
    return max(CENT, (Decimal(str(seconds)) * Decimal(hourly_wage) / 3600).quantize(
        CENT, rounding=ROUND_CEILING))


def measured_seconds(*, stage, families=None):
    """(median active seconds, how many) of submitted assignments of the stage, in `families` (a
    queryset; None: every family)."""
    rows = Assignment.objects.filter(
        unit__stage=stage, status=Assignment.Status.SUBMITTED, active_seconds__isnull=False,
        active_seconds__gt=0,
    )
    if families is not None:
        rows = rows.filter(unit__family__in=families)
    values = list(rows.values_list("active_seconds", flat=True))
    return (statistics.median(values) if values else None), len(values)


@dataclass(frozen=True)
class PayPlan:
    platform: str
    stage: str
    tasks: int
    assignments_per_task: int
    overlap_source: str
    seconds_per_task: float
    time_source: str
    hourly_wage: Decimal
    reward: Decimal
    fee_per_assignment: Decimal | None  # None where the platform bills the batch, not each one
    total_fees: Decimal
    fee_rule: str
    fee_note: str
    budget: Decimal | None
    committed: Decimal

    @property
    def assignments(self):
        return self.tasks * self.assignments_per_task

    @property
    def total_reward(self):
        return self.reward * self.assignments

    @property
    def total(self):
        return self.total_reward + self.total_fees

    @property
    def effective_hourly_wage(self):
        return cents(self.reward * 3600 / Decimal(str(self.seconds_per_task)))

    @property
    def within_budget(self):
        return self.budget is None or self.committed + self.total <= self.budget

    def lines(self):
        rows = [
            f"Pay plan: {self.tasks} {self.stage} tasks × {self.assignments_per_task} assignment(s) "
            f"= {self.assignments} assignments on {self.platform}",
            f"  overlap:             {self.assignments_per_task} assignment(s) per task ({self.overlap_source})",
            f"  time per task:       {self.seconds_per_task:.0f} s ({self.time_source})",
            f"  target wage:         ${self.hourly_wage}/h",
            f"  reward per task:     ${self.reward} (pays ${self.effective_hourly_wage}/h)",
            f"  fee rule:            {self.fee_rule}",
            f"  fee rate:            {self.fee_note}",
        ]
        if self.fee_per_assignment is not None:
            rows.append(f"  fee per assignment:  ${self.fee_per_assignment}")
        rows += [
            f"  rewards:             ${self.total_reward}",
            f"  fees:                ${self.total_fees}",
            f"  total:               ${self.total}",
        ]
        if self.budget is not None:
            rows.append(f"  budget:              ${self.budget} (already committed ${self.committed}: "
                        f"{'within budget' if self.within_budget else 'OVER BUDGET'})")
        return rows


def _drawing_on(families):
    """Tournaments whose battles may hold `families`' instances: those naming one of them, and those
    naming none of the group that owns one (annotation/preferences/eligible.py)."""
    groups = set(families.values_list("group_id", flat=True))
    of_their_groups = Q(group__in=groups - {None})
    if None in groups:
        of_their_groups |= Q(group__isnull=True)
    return Tournament.objects.filter(Q(battles__instance__family__in=families) | Q(families__in=families)
                                     | (Q(families__isnull=True) & of_their_groups)).distinct()


def stage_overlap(*, stage, families=None):
    """(assignments per task, where that number comes from) for a stage's work in `families` (a
    queryset; None: every family): what annotation/crowdwork/stages.py gives its units. Caption and
    verification units take their family's stage overlap; pairwise units take their tournament's
    judgements per pair."""
    label = Stage(stage).label.lower() if stage in Stage.values else stage
    if stage == Stage.INSTRUCTION_GENERATION:
        return 1, "each instruction-generation task is one new instance by one worker"
    if stage == Stage.PAIRWISE:
        tournaments = Tournament.objects.all() if families is None else _drawing_on(families)
        # The newest launched tournament is the one whose battles a study publishes now; before any
        # launch, the newest one is the one being planned.
        tournament = tournaments.order_by(F("launched_at").desc(nulls_last=True), "-created_at").first()
        if tournament is None:
            return 1, "no tournament yet: 1 assumed; a tournament's judgements per pair set it"
        return tournament.judgements_per_pair, f"judgements per pair of tournament “{tournament.name}”"
    configs = StageConfig.objects.filter(stage=stage)
    names = list(families.values_list("name", flat=True)[:2]) if families is not None else []
    only = names[0] if len(names) == 1 else None
    if families is not None:
        configs = configs.filter(family__in=families)
    found = list(configs.values_list("overlap", flat=True))
    overlaps = sorted(set(found))
    if only is not None:
        of = f"of “{only}”"
    else:
        of = "in the one family set up for it" if len(found) == 1 else f"in all {len(found)} families set up for it"
    if not overlaps:
        unset = (f"the {label} stage of “{only}” is not set up yet" if only is not None
                 else f"no family has the {label} stage set up yet")
        return 1, f"{unset}; a stage starts at 1"
    if len(overlaps) == 1:
        return overlaps[0], f"the overlap of the {label} stage {of}"
    # A study drawing from every family publishes each unit at its own family's overlap; the
    # largest keeps the plan from promising less than it may spend.
    return overlaps[-1], (f"the largest overlap of the {label} stage {of} "
                          f"({', '.join(map(str, overlaps))})")


def _number(value, what):
    """`value` as a finite Decimal, or a PlatformError naming `what`."""
    from mturk.exceptions import PlatformError

    try:
        number = Decimal(str(value))
    except ArithmeticError:
        raise PlatformError(f"{what} must be a number (got {value!r}).") from None
    if not number.is_finite():
        raise PlatformError(f"{what} must be a number (got {value!r}).")
    return number


def _refuse_impossible(*, tasks, assignments_per_task, hourly_wage, estimated_seconds, budget, reward):
    """Refuse what no platform could bill, so the command, the admin and any caller say why rather
    than print a plan of negative money."""
    from mturk.exceptions import PlatformError

    if tasks < 1:
        raise PlatformError(f"Plan at least one task (asked for {tasks}).")
    if assignments_per_task < 1:
        raise PlatformError(f"Each task needs at least one assignment (asked for {assignments_per_task}).")
    if _number(hourly_wage, "The target wage") <= 0:
        raise PlatformError(f"The target wage must be more than $0.00 an hour (asked for ${hourly_wage}).")
    if estimated_seconds is not None and _number(estimated_seconds, "The estimated time per task") <= 0:
        raise PlatformError("The estimated time per task must be more than 0 seconds "
                            f"(asked for {estimated_seconds}).")
    if budget is not None and _number(budget, "The budget") < 0:
        raise PlatformError(f"A budget cannot be negative (asked for ${budget}).")
    if reward is not None and _number(reward, "The reward") <= 0:
        raise PlatformError(f"A reward must be more than $0.00 (asked for ${reward}).")


def plan(*, platform, stage, tasks, assignments_per_task=None, hourly_wage=None, families=None,
         estimated_seconds=None, budget=None, committed=Decimal("0.00"), reward=None):
    """The plan for `tasks` tasks of work in `families` (None: every family): reward from the
    measured median time (or the estimate), fees as the platform bills them. Without
    `assignments_per_task` each task asks the stage's overlap."""
    hourly_wage = hourly_wage if hourly_wage is not None else settings.TARGET_HOURLY_WAGE_USD
    if assignments_per_task is None:
        assignments_per_task, overlap_source = stage_overlap(stage=stage, families=families)
    else:
        overlap_source = "as asked"
    _refuse_impossible(tasks=tasks, assignments_per_task=assignments_per_task, hourly_wage=hourly_wage,
                       estimated_seconds=estimated_seconds, budget=budget, reward=reward)
    hourly_wage = Decimal(str(hourly_wage))
    median, count = measured_seconds(stage=stage, families=families)
    if median is not None and count >= MIN_MEASUREMENTS:
        seconds, source = median, f"median active time of {count} submitted assignments"
    elif estimated_seconds is not None:
        seconds = float(estimated_seconds)
        source = (f"estimate; only {count} measured" if count else "estimate; none measured yet")
    else:
        from mturk.exceptions import PlatformError

        raise PlatformError(
            f"No pay can be planned for {stage}: {count} assignments measured (need "
            f"{MIN_MEASUREMENTS}) and no estimated time per task given.")
    reward = Decimal(str(reward)) if reward is not None else reward_for(seconds=seconds,
                                                                       hourly_wage=hourly_wage)
    bill = billing(platform)
    return PayPlan(
        platform=platform, stage=stage, tasks=tasks, assignments_per_task=assignments_per_task,
        overlap_source=overlap_source, seconds_per_task=seconds, time_source=source,
        hourly_wage=hourly_wage, reward=reward,
        fee_per_assignment=(bill.fee_per_assignment(reward=reward, assignments_per_task=assignments_per_task)
                            if bill.per_assignment else None),
        total_fees=bill.fees(reward=reward, assignments_per_task=assignments_per_task, tasks=tasks),
        fee_rule=bill.rule(assignments_per_task), fee_note=bill.note,
        budget=budget, committed=committed,
    )


def batch_cost(*, platform, reward, assignments_per_task, tasks):
    """Rewards and fees of one batch, as the platform bills it: the same sum a plan of that batch
    shows, so the budget check at publishing and the plan never disagree."""
    return Decimal(reward) * assignments_per_task * tasks + billing(platform).fees(
        reward=reward, assignments_per_task=assignments_per_task, tasks=tasks)
