"""Fees, the wage planner and the plan_pay command (paper §2.2: $18/h)."""

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from annotation.models import Assignment, Stage, Worker, WorkUnit
from mturk import pay
from tests.factories import FamilyFactory, WorkerFactory, launch

pytestmark = pytest.mark.django_db


def test_mturk_fee_is_20_percent_with_a_cent_minimum():
    mturk = pay.billing("mturk")
    assert mturk.fee_per_assignment(reward="1.00", assignments_per_task=1) == Decimal("0.20")
    assert mturk.fee_per_assignment(reward="0.03", assignments_per_task=1) == Decimal("0.01")


def test_mturk_fee_is_40_percent_for_ten_or_more_assignments():
    mturk = pay.billing("mturk")
    assert mturk.fee_per_assignment(reward="1.00", assignments_per_task=9) == Decimal("0.20")
    assert mturk.fee_per_assignment(reward="1.00", assignments_per_task=10) == Decimal("0.40")


def test_reward_is_rounded_up_to_pay_at_least_the_wage():
    # 100 s at $18/h is $0.50 exactly; 101 s is $0.505, paid as $0.51.
    assert pay.reward_for(seconds=100, hourly_wage="18") == Decimal("0.50")
    assert pay.reward_for(seconds=101, hourly_wage="18") == Decimal("0.51")


def _submitted(stage, seconds):
    family = FamilyFactory()
    launch(family, stage)
    for n, value in enumerate(seconds):
        unit = WorkUnit.objects.create(stage=stage, key=f"m{n}", family=family)
        Assignment.objects.create(unit=unit, worker=WorkerFactory(), status=Assignment.Status.SUBMITTED,
                                  lease_expires_at=unit.created_at, active_seconds=value)


def test_plan_uses_the_measured_median_active_time():
    _submitted(Stage.CAPTION, [100, 120, 150, 200, 600])
    plan = pay.plan(platform=Worker.Platform.MTURK, stage=Stage.CAPTION, tasks=100)
    assert plan.seconds_per_task == 150
    assert plan.reward == Decimal("0.75")
    assert plan.total == Decimal("90.00")  # 100 × ($0.75 + $0.15)


def test_plan_needs_an_estimate_before_enough_is_measured():
    from mturk.exceptions import PlatformError

    with pytest.raises(PlatformError, match="no estimated time"):
        pay.plan(platform=Worker.Platform.MTURK, stage=Stage.CAPTION, tasks=100)


def test_plan_pay_command_prints_the_caption_stage_plan(capsys):
    _submitted(Stage.CAPTION, [150, 170, 180, 185, 200, 240, 260])
    out = StringIO()
    call_command("plan_pay", "--stage", "caption", "--tasks", "100", "--budget", "150", stdout=out)
    text = out.getvalue()
    with capsys.disabled():
        print("\n--- plan_pay --stage caption --tasks 100 --budget 150 ---\n" + text)
    assert "median active time of 7 submitted assignments" in text
    assert "reward per task:     $0.93" in text
    assert "total:               $112.00" in text
    assert "within budget" in text
