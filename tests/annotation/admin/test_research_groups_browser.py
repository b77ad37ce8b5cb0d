"""Research groups in Chromium: a viewer opens their group's family and finds nothing to change or
launch; a researcher of another group neither finds it in the list nor opens it by its address."""

import os

import pytest
from django.contrib.auth import get_user_model

from annotation import teams
from annotation.models import Membership, Tournament
from tests.annotation.admin.conftest import signed_in_page
from tests.factories import FamilyFactory
from tests.paths import SCREENSHOTS

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "a-long-test-password"


def _member(username, group, role):
    user = get_user_model().objects.create_user(username, password=PASSWORD)
    teams.add_member(group=group, user=user, role=role)


def _signed_in(browser, live_server, username):
    return signed_in_page(browser, live_server, username, PASSWORD)


def test_a_viewer_cannot_change_their_family_and_another_group_cannot_see_it(browser, live_server):
    vision, speech = teams.create_group(name="Vision lab"), teams.create_group(name="Speech lab")
    _member("vera", vision, Membership.Role.VIEWER)
    _member("sam", speech, Membership.Role.RESEARCHER)
    family = FamilyFactory(name="Recipes", group=vision)
    FamilyFactory(name="Street signs", group=speech)
    Tournament.objects.create(name="Vision models", group=vision)

    viewer = _signed_in(browser, live_server, "vera")
    viewer.get_by_role("link", name="Instruction families").first.click()
    viewer.wait_for_url("**/admin/annotation/instructionfamily/")
    # Nothing to run on the list: every action changes something.
    assert viewer.locator("select[name=action]").count() == 0
    assert viewer.get_by_role("link", name="Recipes").count() == 1
    assert viewer.get_by_role("link", name="Street signs").count() == 0
    viewer.get_by_role("link", name="Recipes").click()
    viewer.wait_for_url(f"**/instructionfamily/{family.pk}/change/")
    assert viewer.get_by_role("button", name="Save").count() == 0
    assert "View instruction family" in viewer.content()
    viewer.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/workflow/")
    assert viewer.get_by_role("button", name="Launch instruction generation").count() == 0
    viewer.screenshot(path=str(SCREENSHOTS / "research-group-viewer.png"), full_page=True)
    assert viewer.errors == []

    outsider = _signed_in(browser, live_server, "sam")
    outsider.get_by_role("link", name="Instruction families").first.click()
    outsider.wait_for_url("**/admin/annotation/instructionfamily/")
    assert outsider.get_by_role("link", name="Street signs").count() == 1
    assert outsider.get_by_role("link", name="Recipes").count() == 0
    outsider.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/change/")
    assert "doesn’t exist" in outsider.content()
    outsider.goto(f"{live_server.url}/dashboard/")
    assert "Vision models" not in outsider.content()
    outsider.screenshot(path=str(SCREENSHOTS / "research-group-outsider.png"), full_page=True)
    assert outsider.errors == []
