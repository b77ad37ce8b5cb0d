"""A family's page shows each stage the settings it reads: verification's groups (ask until
decided, how a reference is decided) appear under a verification stage only, and follow the stage
chosen for a new one; a group holding an error is never hidden."""

import os

import pytest

from annotation.models import Stage
from tests.factories import FamilyFactory, launch

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VERIFICATION_GROUPS = ("Ask until decided", "Deciding a verification")


def shown_groups(page, form):
    """The headings of the groups a researcher sees in one stage's form."""
    return [heading.strip() for heading in page.locator(f"#{form} fieldset:visible .fieldset-heading")
            .all_inner_texts()]


def test_only_a_verification_stage_shows_verification_settings(researcher_page, live_server):
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    launch(family, Stage.VERIFICATION, overlap=3)
    page = researcher_page
    page.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/change/")
    forms = {page.locator(f"#stage_configs-{n} select[name$='-stage']").input_value(): f"stage_configs-{n}"
             for n in range(2)}
    for group in VERIFICATION_GROUPS:
        assert group in shown_groups(page, forms[Stage.VERIFICATION])
        assert group not in shown_groups(page, forms[Stage.CAPTION])

    page.locator("#stage_configs-group .add-row a").click()
    added = "stage_configs-2"
    assert not set(VERIFICATION_GROUPS) & set(shown_groups(page, added))
    page.locator(f"#{added} select[name$='-stage']").select_option(Stage.VERIFICATION)
    assert set(VERIFICATION_GROUPS) <= set(shown_groups(page, added))
    page.locator(f"#{added} select[name$='-stage']").select_option(Stage.PAIRWISE)
    assert not set(VERIFICATION_GROUPS) & set(shown_groups(page, added))


def test_a_refused_verification_setting_stays_in_sight(researcher_page, live_server):
    family = FamilyFactory()
    launch(family, Stage.PAIRWISE)
    page = researcher_page
    page.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/change/")
    # A researcher whose browser ran no script, or who ticked it before changing the stage.
    page.evaluate("document.querySelectorAll('#stage_configs-0 fieldset').forEach(f => f.hidden = false)")
    page.locator("input[name='stage_configs-0-adaptive']").check()
    page.get_by_role("button", name="Save and continue editing").click()
    assert "verification setting" in page.locator("#stage_configs-0").inner_text()
    assert "Ask until decided" in shown_groups(page, "stage_configs-0")
