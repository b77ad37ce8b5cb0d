"""Pay planned from measured work time to a target hourly wage, with the platform's fees.

The paper paid $18/h (§2.2); CHIRP $0.10 per minute (C.2.2). MTurk charges 20% of reward and
bonus, 20% more for HITs with 10 or more assignments, and at least $0.01 per assignment.
Prolific and CloudResearch Connect charge a share of rewards and bonuses that depends on the
account (academic or not); PLATFORM_FEE_RATES_JSON sets yours, and until it does the plan uses
the academic rate and says that it assumed it.
"""

import statistics
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db.models import Sum

from annotation.models import Assignment, Worker

CENT = Decimal("0.01")
MTURK_FEE = Decimal("0.20")
MTURK_LARGE_HIT_FEE = Decimal("0.20")
MTURK_LARGE_HIT_ASSIGNMENTS = 10
MTURK_MIN_FEE = Decimal("0.01")
MIN_MEASUREMENTS = 5


def cents(amount):
    return Decimal(amount).quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class FeeRate:
    """A platform's share of rewards and bonuses, and where that number came from."""

    rate: Decimal
    source: str  # "configured", "assumed" or "none"
    what: str  # whose rate it is, for people

    @property
    def note(self):
        percent = f"{self.rate * 100:.1f}%"
        if self.source == "configured":
            return f"{self.what} {percent} from PLATFORM_FEE_RATES_JSON"
        if self.source == "assumed":
            return (f"{self.what} {percent}, assumed: {ASSUMED_FEE_REASONS[self.what]}; set "
                    "PLATFORM_FEE_RATES_JSON to your account's rate")
        return f"no platform fee ({self.what})"


# The academic and non-profit rates each platform publishes (Prolific: 33.3% of rewards and
# bonuses, plus VAT where it applies; CloudResearch Connect: 25%, 40% for other researchers).
ASSUMED_FEE_RATES = {
    Worker.Platform.PROLIFIC: ("Prolific", Decimal("0.333")),
    Worker.Platform.CLOUDRESEARCH: ("CloudResearch Connect", Decimal("0.25")),
}
ASSUMED_FEE_REASONS = {
    "Prolific": "its academic rate (plus VAT where it applies; higher for companies)",
    "CloudResearch Connect": "its academic and non-profit rate (40% for other researchers)",
}


def fee_rate(platform):
    """The fee rate of a platform other than MTurk (whose fee has its own rules)."""
    what, assumed = ASSUMED_FEE_RATES.get(platform, (Worker.Platform(platform).label
                                                     if platform in Worker.Platform.values else platform,
                                                     None))
    if platform in settings.PLATFORM_FEE_RATES:
        return FeeRate(Decimal(str(settings.PLATFORM_FEE_RATES[platform])), "configured", what)
    if assumed is not None:
        return FeeRate(assumed, "assumed", what)
    return FeeRate(Decimal("0"), "none", what)


def fee_per_assignment(*, platform, reward, assignments_per_task=1):
    reward = Decimal(reward)
    if platform == Worker.Platform.MTURK:
        rate = MTURK_FEE + (MTURK_LARGE_HIT_FEE if assignments_per_task >= MTURK_LARGE_HIT_ASSIGNMENTS
                            else Decimal("0"))
        return max(MTURK_MIN_FEE, cents(reward * rate))
    return cents(reward * fee_rate(platform).rate)


def bonus_fee(*, platform, amount):
    amount = Decimal(amount)
    if platform == Worker.Platform.MTURK:
        return max(MTURK_MIN_FEE, cents(amount * MTURK_FEE))
    return cents(amount * fee_rate(platform).rate)


def reward_for(*, seconds, hourly_wage):
    """The reward, rounded up to the cent, that pays `hourly_wage` for `seconds` of work."""
    return max(CENT, (Decimal(str(seconds)) * Decimal(hourly_wage) / 3600).quantize(
        CENT, rounding=ROUND_CEILING))


def measured_seconds(*, stage, family=None):
    """(median active seconds, how many) of submitted assignments of the stage."""
    rows = Assignment.objects.filter(
        unit__stage=stage, status=Assignment.Status.SUBMITTED, active_seconds__isnull=False,
        active_seconds__gt=0,
    )
    if family is not None:
        rows = rows.filter(unit__family=family)
    values = list(rows.values_list("active_seconds", flat=True))
    return (statistics.median(values) if values else None), len(values)


@dataclass(frozen=True)
class PayPlan:
    platform: str
    stage: str
    tasks: int
    assignments_per_task: int
    seconds_per_task: float
    time_source: str
    hourly_wage: Decimal
    reward: Decimal
    fee_per_assignment: Decimal
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
    def total_fees(self):
        return self.fee_per_assignment * self.assignments

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
            f"  time per task:       {self.seconds_per_task:.0f} s ({self.time_source})",
            f"  target wage:         ${self.hourly_wage}/h",
            f"  reward per task:     ${self.reward} (pays ${self.effective_hourly_wage}/h)",
            f"  fee per assignment:  ${self.fee_per_assignment} ({self.fee_note})",
            f"  rewards:             ${self.total_reward}",
            f"  fees:                ${self.total_fees}",
            f"  total:               ${self.total}",
        ]
        if self.budget is not None:
            rows.append(f"  budget:              ${self.budget} (already committed ${self.committed}: "
                        f"{'within budget' if self.within_budget else 'OVER BUDGET'})")
        return rows


def _fee_note(platform, assignments_per_task):
    if platform == Worker.Platform.MTURK:
        extra = " + 20% for 10+ assignments" if assignments_per_task >= MTURK_LARGE_HIT_ASSIGNMENTS else ""
        return f"MTurk 20%{extra}, min $0.01"
    return fee_rate(platform).note


def plan(*, platform, stage, tasks, assignments_per_task=1, hourly_wage=None, family=None,
         estimated_seconds=None, budget=None, committed=Decimal("0.00"), reward=None):
    """The plan for `tasks` tasks: reward from the measured median time (or the estimate)."""
    hourly_wage = Decimal(hourly_wage if hourly_wage is not None else settings.TARGET_HOURLY_WAGE_USD)
    median, count = measured_seconds(stage=stage, family=family)
    if median is not None and count >= MIN_MEASUREMENTS:
        seconds, source = median, f"median active time of {count} submitted assignments"
    elif estimated_seconds:
        seconds = float(estimated_seconds)
        source = (f"estimate; only {count} measured" if count else "estimate; none measured yet")
    else:
        from mturk.exceptions import PlatformError

        raise PlatformError(
            f"No pay can be planned for {stage}: {count} assignments measured (need "
            f"{MIN_MEASUREMENTS}) and no estimated time per task given.")
    reward = Decimal(reward) if reward is not None else reward_for(seconds=seconds,
                                                                  hourly_wage=hourly_wage)
    return PayPlan(
        platform=platform, stage=stage, tasks=tasks, assignments_per_task=assignments_per_task,
        seconds_per_task=seconds, time_source=source, hourly_wage=hourly_wage, reward=reward,
        fee_per_assignment=fee_per_assignment(platform=platform, reward=reward,
                                              assignments_per_task=assignments_per_task),
        fee_note=_fee_note(platform, assignments_per_task), budget=budget, committed=committed,
    )


def plan_for_study(study, *, tasks, assignments_per_task=1):
    return plan(platform=study.platform, stage=study.stage, tasks=tasks,
                assignments_per_task=assignments_per_task, hourly_wage=study.target_hourly_wage_usd,
                family=study.family, estimated_seconds=study.estimated_seconds,
                budget=study.budget_usd, committed=committed_spend(study))


def batch_cost(*, platform, reward, assignments_per_task, tasks):
    fee = fee_per_assignment(platform=platform, reward=reward,
                             assignments_per_task=assignments_per_task)
    return (Decimal(reward) + fee) * assignments_per_task * tasks


def committed_spend(study):
    """What the study may cost already: published work at its reward and fees, and bonuses."""
    from mturk.models import Bonus, Hit

    total = Decimal("0.00")
    for hit in Hit.objects.filter(study=study).only("reward_usd", "max_assignments"):
        total += batch_cost(platform=study.platform, reward=hit.reward_usd,
                            assignments_per_task=hit.max_assignments, tasks=1)
    if study.places_published:
        total += batch_cost(platform=study.platform, reward=study.reward_usd,
                            assignments_per_task=1, tasks=study.places_published)
    bonuses = Bonus.objects.filter(submission__study=study).exclude(status=Bonus.Status.FAILED)
    amount = bonuses.aggregate(total=Sum("amount_usd"))["total"] or Decimal("0.00")
    fees = sum((bonus_fee(platform=study.platform, amount=b.amount_usd) for b in bonuses),
               Decimal("0.00"))
    return total + amount + fees
