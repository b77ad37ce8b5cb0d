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
    """Every page of every registered model's admin (its own pages too: a family's workflow, Table
    2, the sheet import, an audit log), each with one demo row where it names a row; files and JSON
    left out."""
    pages = set()
    for model, model_admin in admin.site._registry.items():
        first = model._default_manager.order_by("pk").values_list("pk", flat=True).first()
        for pattern in model_admin.get_urls():
            named = getattr(pattern, "name", None)
            route = str(pattern.pattern)
            if not named or route.endswith((".csv", ".json")) or named.endswith("_autocomplete"):
                continue
            arguments = list(getattr(pattern.pattern, "converters", {}))
            if len(arguments) > 1 or (arguments and first is None):
                continue
            try:
                pages.add(reverse(f"admin:{named}", args=[first] * len(arguments)))
            except NoReverseMatch:
                continue
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
    assert len(pages) > 120
    for path in pages:
        # Asked first without the page: a model nobody adds by hand refuses its add form (403), an
        # action is posted to (405), and Chromium will not show an empty refusal. None fails.
        asked = page.request.get(live_server.url + path, max_redirects=0)
        assert asked.status < 500, path
        if asked.status != 200 or "text/html" not in asked.headers.get("content-type", ""):
            continue
        page.goto(live_server.url + path)
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > page.viewport_size["width"]:
            wide[path] = width
        if rows := page.evaluate(CLIPPED_ROWS):
            clipped[path] = rows
    assert wide == {}
    assert clipped == {}
