"""Every admin page a researcher opens fits a small laptop's window (1024 pixels): nothing to
scroll sideways for, and no field, choice or help text cut off at the edge of its form row. The
pages are enumerated from the admin's own registry, each model's list, its add form and the change
form of one of its rows from the demo, so a page added later is held to it the day it is added."""

import os

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.urls import NoReverseMatch, reverse

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def admin_pages():
    """Each registered model's list, add form and one row's change form (where it has rows)."""
    pages = []
    for model in admin.site._registry:
        meta = model._meta
        try:
            pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
            pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_add"))
        except NoReverseMatch:
            continue
        first = model._default_manager.order_by("pk").values_list("pk", flat=True).first()
        if first is not None:
            pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[first]))
    return sorted(pages)


# Django's form rows hide what passes their edge: a row whose content is wider than it is cut off.
CLIPPED_ROWS = """() => [...document.querySelectorAll('.form-row')]
    .filter(row => row.offsetParent !== null && row.scrollWidth > row.clientWidth + 1)
    .map(row => row.className)"""


def test_no_admin_page_is_wider_than_a_small_laptops_window(researcher_page, live_server, media_root):
    call_command("load_demo")
    page, wide, clipped = researcher_page, {}, {}
    page.set_viewport_size({"width": 1024, "height": 800})
    pages = admin_pages()
    assert len(pages) > 60
    for path in pages:
        response = page.goto(live_server.url + path)
        # A model nobody adds by hand refuses its add form (403); every other page opens.
        assert response.status in (200, 403), path
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > page.viewport_size["width"]:
            wide[path] = width
        if rows := page.evaluate(CLIPPED_ROWS):
            clipped[path] = rows
    assert wide == {}
    assert clipped == {}
