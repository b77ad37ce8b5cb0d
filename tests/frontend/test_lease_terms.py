"""Issue 38, item 5: the server tells a task's page when its lease lapses and whether working on
can move that later, in the page's first config and in every heartbeat's answer."""

import pytest
from django.test import Client

from annotation.models import Stage, StageConfig
from tests.frontend_support import caption_unit, logged_in, preview_url

pytestmark = pytest.mark.django_db


def test_a_task_page_is_told_its_lease_expiry_and_the_heartbeat_renews_it(settings):
    settings.LEASE_IDLE_MINUTES = 5
    caption_unit()
    ann = logged_in()
    page = ann.get(f"/work/{Stage.CAPTION}/")
    lease = page.context["config"]["lease"]
    assert 295 <= lease["expires_in"] <= 300 and lease["renewable"] is True
    assert b'data-lease-notice role="status" aria-live="polite"' in page.content
    beat = ann.post("/work/heartbeat/", {"token": page.context["token"]}).json()
    assert beat["ok"] and 295 <= beat["expires_in"] <= 300 and beat["renewable"] is True
    assert beat["expires_at"] >= lease["expires_at"]


def test_a_lease_at_the_stage_limit_is_told_so(settings):
    settings.LEASE_IDLE_MINUTES = 5
    caption_unit()
    StageConfig.objects.update(lease_minutes=1)  # the stage's limit comes before the idle limit
    ann = logged_in()
    page = ann.get(f"/work/{Stage.CAPTION}/")
    lease = page.context["config"]["lease"]
    assert lease["renewable"] is False and lease["expires_in"] <= 60
    beat = ann.post("/work/heartbeat/", {"token": page.context["token"]}).json()
    assert beat["ok"] and beat["renewable"] is False and beat["expires_in"] <= 60


def test_a_preview_holds_no_lease_and_is_told_of_none():
    page = Client().get(preview_url(caption_unit()))
    assert page.context["config"]["lease"] is None
