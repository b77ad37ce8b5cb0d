"""A crowd study starts with its own platform's defaults, and its pay plan names the fee it used."""

import re
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from mturk import pay

pytestmark = pytest.mark.django_db


def field_value(page, name):
    found = re.search(rf'name="{name}"[^>]*value="([^"]*)"', page) or re.search(
        rf'value="([^"]*)"[^>]*name="{name}"', page)
    return found.group(1) if found else ""


def test_adding_a_study_asks_for_its_platform_first(admin_client):
    page = admin_client.get(reverse("admin:mturk_crowdstudy_add")).content.decode()
    for label in ("MTurk", "CloudResearch", "Prolific", "In-house"):
        assert f">New {label} study</a>" in page


@pytest.mark.parametrize("platform, countries, approval, approved, auto_days", [
    ("mturk", "US", "98", "1000", "3"),
    ("prolific", "", "0", "0", "21"),
    ("cloudresearch", "", "0", "0", "14"),
])
def test_a_new_study_starts_with_its_platforms_defaults(admin_client, platform, countries, approval, approved,
                                                        auto_days):
    page = admin_client.get(reverse("admin:mturk_crowdstudy_add"), {"platform": platform}).content.decode()
    assert f'<option value="{platform}" selected>' in page
    assert field_value(page, "auto_approval_days") == auto_days
    if platform != "mturk":
        # Not asked (the platform screens its own participants); saved as the platform's defaults,
        # which test_a_new_study_saves_with_its_platforms_defaults_as_the_form_shows_them reads back.
        assert 'name="min_approved_hits"' not in page
        return
    assert field_value(page, "worker_countries") == countries
    assert field_value(page, "min_approval_rate") == approval
    assert field_value(page, "min_approved_hits") == approved


@pytest.mark.parametrize("platform", ["prolific", "cloudresearch", "toloka", "local"])
def test_a_study_form_shows_only_its_own_platforms_settings(admin_client, platform):
    """MTurk's HIT settings and qualification requirements are not asked of a study whose platform
    screens its own participants (a Prolific study's form asked for approved HITs)."""
    page = admin_client.get(reverse("admin:mturk_crowdstudy_add"), {"platform": platform}).content.decode()
    for mturk_only in ("min_approved_hits", "min_approval_rate", "worker_countries", "keywords", "frame_height",
                       "lifetime_hours", "requires_stage_qualification"):
        assert f'name="{mturk_only}"' not in page, mturk_only
    assert 'name="auto_approval_days"' in page and 'name="completion_code"' in page
    assert "set in the platform's own screening" in page
    mturk = admin_client.get(reverse("admin:mturk_crowdstudy_add"), {"platform": "mturk"}).content.decode()
    assert 'name="min_approved_hits"' in mturk and 'name="keywords"' in mturk


def plan_text(platform):
    plan = pay.plan(platform=platform, stage="caption", tasks=10, estimated_seconds=60, hourly_wage="18.00")
    return plan, "\n".join(plan.lines())


def test_a_prolific_pay_plan_says_it_assumed_prolifics_academic_fee(settings):
    settings.PLATFORM_FEE_RATES = {}
    plan, text = plan_text("prolific")
    # 33.3% of the batch's $3.00 of rewards is $0.999, billed as $1.00.
    assert plan.reward == Decimal("0.30") and plan.total_fees == Decimal("1.00")
    assert "Prolific 33.3%, assumed: its academic rate" in text and "PLATFORM_FEE_RATES_JSON" in text


def test_a_connect_pay_plan_says_it_assumed_connects_academic_fee(settings):
    settings.PLATFORM_FEE_RATES = {}
    plan, text = plan_text("cloudresearch")
    assert plan.total_fees == Decimal("0.75")  # 25% of 10 × $0.30, rounded once
    assert "CloudResearch Connect 25.0%, assumed" in text


def test_a_configured_fee_is_named_as_configured(settings):
    settings.PLATFORM_FEE_RATES = {"prolific": 0.428}
    plan, text = plan_text("prolific")
    assert plan.total_fees == Decimal("1.28")  # 42.8% of $3.00 is $1.284
    assert "Prolific 42.8% from PLATFORM_FEE_RATES_JSON" in text and "assumed" not in text


def test_in_house_work_has_no_platform_fee(settings):
    settings.PLATFORM_FEE_RATES = {}
    plan, text = plan_text("local")
    assert plan.total_fees == Decimal("0.00") and "no platform fee" in text


class _Form(HTMLParser):
    """The values a browser would send for the admin's change form, as the page shows them."""

    def __init__(self):
        super().__init__()
        self.values, self._select, self._textarea = {}, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        name = attrs.get("name")
        if tag == "input" and name and attrs.get("type") not in ("submit", "button", "file"):
            if attrs.get("type") == "checkbox":
                if "checked" in attrs:
                    self.values[name] = attrs.get("value", "on")
            else:
                self.values[name] = attrs.get("value", "")
        elif tag == "select" and name:
            self._select = name
            self.values.setdefault(name, "")
        elif tag == "option" and self._select and "selected" in attrs:
            self.values[self._select] = attrs.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.values[name] = ""

    def handle_data(self, data):
        if self._textarea:
            self.values[self._textarea] += data

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


@pytest.mark.parametrize("platform", ["mturk", "prolific", "cloudresearch", "local"])
def test_a_new_study_saves_with_its_platforms_defaults_as_the_form_shows_them(admin_client, platform):
    from annotation.models import Stage
    from mturk.models import CrowdStudy

    add = reverse("admin:mturk_crowdstudy_add") + f"?platform={platform}"
    form = _Form()
    form.feed(admin_client.get(add).content.decode())
    sent = {**form.values, "stage": Stage.CAPTION, "name": f"Captions on {platform}",
            "external_id": "60f6acb180a7b59ac0621f9e", "completion_code": "C1ABCD23"}
    response = admin_client.post(add, sent)
    assert response.status_code == 302, re.findall(r'class="errorlist[^"]*"[^>]*>(.*?)</ul>',
                                                    response.content.decode(), re.S)
    saved = CrowdStudy.objects.get(name=f"Captions on {platform}")
    assert saved.worker_countries == ("US" if platform == "mturk" else "")
    assert (saved.min_approval_rate, saved.min_approved_hits) == ((98, 1000) if platform == "mturk" else (0, 0))
