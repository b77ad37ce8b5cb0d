"""Money as each platform bills it (issue 24): a plan per platform checked against the platform's
published rule and example, the stage's real overlap, impossible inputs refused, and the budget
check at publishing agreeing with the plan.

The published rules the numbers below come from (read 2026-11):
- MTurk, requester.mturk.com/pricing: "20% fee on the reward and bonus amount (if any) you pay
  Workers. HITs with 10 or more assignments will be charged an additional 20% fee on the reward
  you pay Workers. The minimum fee is $0.01 per assignment or bonus payment." Its answer on
  rounding: "we round half up ... $0.104 is rounded to $0.10, $0.105 is rounded to $0.11, and
  $0.108 is rounded to $0.11."
- CloudResearch Connect, Researcher Help "Project Cost": "CloudResearch charges a 25% platform fee
  for Connect Academic and Non-Profit Researchers. Thus, the total cost of your study is whatever
  payments you make to participants plus 25%. All other researchers will incur a 40% platform fee."
- Prolific, prolific.com/pricing: platform fee 33.3% (academic or non-profit) or 42.8% (corporate)
  of participant rewards; its API's "Calculate the study cost" takes the reward and the number of
  places and answers one total "including VAT and fees".
"""

from contextlib import redirect_stderr
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import ManagementUtility, call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation.crowdwork.stages import create_work_units
from annotation.models import Stage, Tournament
from mturk import pay, selectors
from mturk.exceptions import PlatformError
from mturk.models import CrowdStudy
from mturk.services import publishing
from tests.factories import FamilyFactory, InstanceFactory, launch
from tests.mturk_wire import make_researcher

pytestmark = pytest.mark.django_db

# 66 s at $18/h is $0.33 a task; 40 s is $0.20.
THIRTY_THREE_CENTS, TWENTY_CENTS = 66, 40


def caption_plan(platform, *, tasks=100, seconds=THIRTY_THREE_CENTS, **options):
    return pay.plan(platform=platform, stage=Stage.CAPTION, tasks=tasks, estimated_seconds=seconds,
                    hourly_wage="18.00", **options)


def connect_study(budget):
    family = FamilyFactory()
    InstanceFactory(family=family)
    launch(family, Stage.CAPTION)
    create_work_units(family=family, stage=Stage.CAPTION)  # work ready for the places published
    return CrowdStudy.objects.create(platform="cloudresearch", stage=Stage.CAPTION, family=family,
                                     name="Captions on Connect", external_id="60f6acb180a7b59ac0621f9e",
                                     reward_usd=Decimal("0.33"), estimated_seconds=THIRTY_THREE_CENTS,
                                     budget_usd=budget)


# --- each platform against its published rule ------------------------------------------------------


def test_mturk_plan_rounds_each_assignments_fee_half_up_as_mturks_pricing_page_says():
    # MTurk's rounding examples: a fee of $0.104 is $0.10 and one of $0.108 is $0.11, per
    # assignment. ($0.105 needs a reward of $0.525, which no reward in cents reaches at 20%.)
    at_52 = caption_plan("mturk", seconds=104)   # $0.52 reward: 20% is $0.104
    at_54 = caption_plan("mturk", seconds=108)   # $0.54 reward: 20% is $0.108
    assert (at_52.reward, at_52.fee_per_assignment, at_52.total_fees) == (
        Decimal("0.52"), Decimal("0.10"), Decimal("10.00"))
    assert (at_54.reward, at_54.fee_per_assignment, at_54.total_fees) == (
        Decimal("0.54"), Decimal("0.11"), Decimal("11.00"))
    text = "\n".join(at_52.lines())
    assert "fee rule:            MTurk: 20% of each assignment's reward, rounded half up per assignment, " \
           "min $0.01" in text


def test_mturk_plan_charges_40_percent_on_hits_of_ten_assignments_and_at_least_a_cent():
    # 10 assignments per HIT: 20% + 20%; $0.26 × 40% = $0.104 → $0.10 on each of 100 assignments.
    large = caption_plan("mturk", tasks=10, seconds=52, assignments_per_task=10)
    assert (large.reward, large.fee_per_assignment, large.total_fees) == (
        Decimal("0.26"), Decimal("0.10"), Decimal("10.00"))
    assert "20% more for HITs of 10+ assignments" in "\n".join(large.lines())
    # "The minimum fee is $0.01 per assignment": 20% of $0.02 is $0.004, billed as $0.01.
    tiny = caption_plan("mturk", tasks=100, seconds=4)
    assert (tiny.reward, tiny.total_fees) == (Decimal("0.02"), Decimal("1.00"))


def test_connect_plan_charges_25_percent_of_the_batchs_rewards_rounded_once(settings):
    # The finding: 100 tasks at $0.33 are $33.00 of payments; "plus 25%" is $8.25, where rounding
    # each participant's $0.0825 to $0.08 first made it $8.00.
    settings.PLATFORM_FEE_RATES = {}
    plan = caption_plan("cloudresearch")
    assert (plan.reward, plan.total_reward, plan.total_fees, plan.total) == (
        Decimal("0.33"), Decimal("33.00"), Decimal("8.25"), Decimal("41.25"))
    text = "\n".join(plan.lines())
    assert "fee rule:            CloudResearch Connect: 25.0% of the batch's rewards, rounded once to the cent" in text
    assert "fees:                $8.25" in text and "total:               $41.25" in text
    assert "fee per assignment" not in text  # Connect bills no fee per assignment


def test_connect_plan_at_the_40_percent_rate_for_other_researchers(settings):
    settings.PLATFORM_FEE_RATES = {"cloudresearch": 0.40}
    plan = caption_plan("cloudresearch")
    assert plan.total_fees == Decimal("13.20")  # 40% of $33.00
    assert "CloudResearch Connect 40.0% from PLATFORM_FEE_RATES_JSON" in "\n".join(plan.lines())


def test_prolific_plan_charges_its_rate_on_the_studys_rewards_rounded_once(settings):
    # Corporate 42.8% of 100 places at $0.33: $14.124, billed $14.12 (not 100 × $0.14 = $14.00).
    settings.PLATFORM_FEE_RATES = {"prolific": 0.428}
    plan = caption_plan("prolific")
    assert (plan.total_reward, plan.total_fees) == (Decimal("33.00"), Decimal("14.12"))
    assert "Prolific: 42.8% of the batch's rewards, rounded once to the cent" in "\n".join(plan.lines())


def test_the_pairwise_plan_on_prolific_bills_its_judgements_as_one_batch(settings):
    # The finding: 27 battles judged 5 times each at $0.20 are $27.00 of rewards; 33.3% of that is
    # $8.991, billed $8.99, where 135 × $0.07 (33.3% of $0.20, rounded per place) made $9.45.
    settings.PLATFORM_FEE_RATES = {}
    family = FamilyFactory()
    Tournament.objects.create(name="VisIT pairwise", judgements_per_pair=5)
    study = CrowdStudy.objects.create(platform="prolific", stage=Stage.PAIRWISE, family=family,
                                      name="Pairwise", estimated_seconds=TWENTY_CENTS)
    plan = selectors.plan_for_study(study, tasks=27)
    assert (plan.assignments, plan.reward, plan.total_reward, plan.total_fees) == (
        135, Decimal("0.20"), Decimal("27.00"), Decimal("8.99"))
    assert "judgements per pair of tournament “VisIT pairwise”" in "\n".join(plan.lines())


# --- the stage's real overlap ---------------------------------------------------------------------


def test_the_study_page_plans_verification_with_the_stages_overlap(admin_client):
    family = FamilyFactory(name="Contextual knowledge")
    launch(family, Stage.VERIFICATION, overlap=2)
    study = CrowdStudy.objects.create(platform="mturk", stage=Stage.VERIFICATION, family=family,
                                      name="Verification", estimated_seconds=60)
    page = admin_client.get(reverse("admin:mturk_crowdstudy_change", args=[study.pk])).content.decode()
    assert "100 verification tasks × 2 assignment(s) = 200 assignments on mturk" in page
    assert "× 1 assignment(s)" not in page
    # 200 assignments at $0.30 with MTurk's $0.06 each.
    assert "total:               $72.00" in page


def test_the_plan_for_a_pairwise_study_asks_its_tournaments_judgements_per_pair():
    family = FamilyFactory()
    Tournament.objects.create(name="Five judgements", judgements_per_pair=5)
    study = CrowdStudy.objects.create(platform="mturk", stage=Stage.PAIRWISE, family=family,
                                      name="Pairwise", estimated_seconds=60)
    assert selectors.plan_for_study(study, tasks=10).assignments == 50


def test_plan_pay_without_a_study_plans_the_largest_overlap_of_the_stage_and_says_so():
    launch(FamilyFactory(), Stage.CAPTION, overlap=1)
    launch(FamilyFactory(), Stage.CAPTION, overlap=3)
    out = StringIO()
    call_command("plan_pay", "--stage", "caption", "--tasks", "10", "--estimate-seconds", "60", stdout=out)
    assert "10 caption tasks × 3 assignment(s) = 30 assignments" in out.getvalue()
    assert "the largest overlap of the instruction-conditioned caption stage in all 2 families set up " \
           "for it (1, 3)" in out.getvalue()


# --- impossible inputs ----------------------------------------------------------------------------


@pytest.mark.parametrize("options, reason", [
    ({"tasks": -5}, "Plan at least one task \\(asked for -5\\)"),
    ({"tasks": 0}, "Plan at least one task"),
    ({"assignments_per_task": 0}, "at least one assignment"),
    ({"hourly_wage": "0"}, "wage must be more than \\$0.00"),
    ({"hourly_wage": "-18"}, "wage must be more than \\$0.00"),
    ({"estimated_seconds": -60}, "more than 0 seconds"),
    ({"budget": Decimal("-1")}, "budget cannot be negative"),
])
def test_the_planner_refuses_what_no_platform_could_bill(options, reason):
    arguments = {"platform": "mturk", "stage": Stage.CAPTION, "tasks": 100, "estimated_seconds": 60,
                 "hourly_wage": "18.00"} | options
    with pytest.raises(PlatformError, match=reason):
        pay.plan(**arguments)


def test_plan_pay_refuses_negative_tasks_and_exits_non_zero_with_the_reason():
    with pytest.raises(CommandError, match="Plan at least one task \\(asked for -5\\)"):
        call_command("plan_pay", "--tasks", "-5", "--estimate-seconds", "60", stdout=StringIO())
    # As a shell runs it: manage.py plan_pay --tasks -5 ...
    errors = StringIO()
    with redirect_stderr(errors), pytest.raises(SystemExit) as exit_:
        ManagementUtility(["manage.py", "plan_pay", "--tasks", "-5", "--estimate-seconds", "60"]).execute()
    assert exit_.value.code == 1
    assert "Plan at least one task (asked for -5)." in errors.getvalue()


def test_a_study_with_a_negative_budget_gets_no_plan_and_publishes_nothing():
    study = connect_study(Decimal("-10.00"))
    with pytest.raises(PlatformError, match="budget cannot be negative"):
        selectors.plan_for_study(study, tasks=100)
    with pytest.raises(PlatformError, match="negative budget"):
        publishing.publish_batch(study=study, tasks=1, actor=make_researcher())
    study.refresh_from_db()
    assert study.places_published == 0


# --- the budget check at publishing and the plan agree --------------------------------------------


def test_publishing_refuses_the_places_the_plan_says_are_over_budget(settings):
    settings.PLATFORM_FEE_RATES = {}
    study = connect_study(Decimal("41.24"))
    plan = selectors.plan_for_study(study, tasks=100)
    assert plan.total == Decimal("41.25") and not plan.within_budget
    with pytest.raises(PlatformError, match="\\$41.25.*over its \\$41.24 budget"):
        publishing.publish_batch(study=study, tasks=100, actor=make_researcher())


def test_published_places_commit_what_the_plan_said_they_cost(settings):
    settings.PLATFORM_FEE_RATES = {}
    study = connect_study(Decimal("41.25"))
    plan = selectors.plan_for_study(study, tasks=100)
    assert plan.within_budget
    publishing.publish_batch(study=study, tasks=100, actor=make_researcher())
    assert selectors.committed_spend(study) == plan.total == Decimal("41.25")
