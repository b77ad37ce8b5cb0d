"""Issue 38, item 5 in headless Chromium: the task page warns before its lease lapses and says
plainly when it has, from the expiry the server gives it; giving a task back takes no new one
until the annotator asks. Screenshots go to /tmp/lease38-*.png for a person to look at."""

import os
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Assignment, StageConfig
from tests.frontend.test_annotator_moving_on_browser import CAPTION, log_in
from tests.frontend_support import caption_unit

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTICE = "[data-lease-notice]"
WARNING = "text=Your hold on this task ends in"
LAPSED = "text=Your hold on this task has ended"


def shot(page, name):
    page.screenshot(path=f"/tmp/lease38-{name}.png", full_page=False)


def test_an_idle_page_warns_before_its_lease_lapses_and_says_when_it_has(page, live_server, settings):
    settings.LEASE_IDLE_MINUTES = 0.2  # twelve seconds after the last sign of life
    settings.LEASE_WARNING_SECONDS = 8
    caption_unit()
    log_in(page, live_server)
    page.click("a:has-text('Start') >> nth=0")
    page.locator("#caption-0").wait_for()
    lease = Assignment.objects.get()
    notice = page.locator(NOTICE)
    assert notice.get_attribute("aria-live") == "polite"
    assert not notice.is_visible()
    page.fill("#caption-0", CAPTION[:40])

    page.locator(WARNING).wait_for(timeout=15000)
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.LEASED and lease.lease_expires_at > timezone.now()
    assert "keep working to keep it" in notice.inner_text()
    shot(page, "warning-desktop")

    # Working again is a sign of life: the page renews the lease at once and the warning goes.
    page.type("#caption-0", " on a")
    notice.wait_for(state="hidden", timeout=5000)
    lease.refresh_from_db()
    assert (lease.lease_expires_at - timezone.now()).total_seconds() > 8

    page.set_viewport_size({"width": 390, "height": 844})
    page.locator(WARNING).wait_for(timeout=15000)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "warning-390")

    page.locator(LAPSED).wait_for(timeout=15000)
    lease.refresh_from_db()
    # The page is told whole seconds, rounded down: it may say "ended" up to a second early, never late.
    assert (lease.lease_expires_at - timezone.now()).total_seconds() < 1
    text = notice.inner_text()
    assert "only if nobody else has taken it" in text and "kept in this browser as a draft" in text
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "lapsed-390")
    page.locator("[data-submit]").scroll_into_view_if_needed()
    assert page.locator(LAPSED).is_visible()  # still in view down at the answer, where they type
    shot(page, "lapsed-390-scrolled")
    page.set_viewport_size({"width": 1280, "height": 800})
    shot(page, "lapsed-desktop")

    # Nobody took the slot meanwhile: working again takes the task back, and the answer counts.
    page.type("#caption-0", " saucer, steam rising from the cup and a spoon beside it on the table.")
    page.locator("text=This task is yours again").wait_for(timeout=5000)
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.LEASED and lease.lease_expires_at > timezone.now()
    page.click("[data-submit]")
    page.locator("text=Nothing waiting").wait_for()
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.SUBMITTED
    assert page.errors == []


def test_a_lease_at_the_stage_limit_asks_to_submit_before_it_ends(page, live_server, settings):
    settings.LEASE_IDLE_MINUTES = 5
    caption_unit()
    StageConfig.objects.update(lease_minutes=1)  # shorter than the idle limit: no sign of life extends it
    log_in(page, live_server)
    page.set_viewport_size({"width": 390, "height": 844})
    page.click("a:has-text('Start') >> nth=0")
    page.locator(WARNING).wait_for(timeout=5000)
    text = page.locator(NOTICE).inner_text()
    assert "about 1 minute" in text and "Please submit before then" in text
    assert "keep working" not in text
    shot(page, "limit-390")
    assert page.errors == []


def test_giving_a_task_back_takes_no_new_task_until_asked(page, live_server):
    caption_unit(), caption_unit()
    log_in(page, live_server)
    page.click("a:has-text('Start') >> nth=0")
    page.locator("#caption-0").wait_for()
    given = Assignment.objects.get()
    page.click("button:has-text('Give this task back')")
    page.locator("[data-notice]:has-text('Task given back')").wait_for()
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "given-back-390")
    page.wait_for_timeout(500)
    assert list(Assignment.objects.values_list("pk", "status")) == [(given.pk, Assignment.Status.RETURNED)]

    page.click("button:has-text('Take the next task')")
    page.locator("#caption-0").wait_for()
    taken = Assignment.objects.exclude(pk=given.pk).get()
    assert taken.status == Assignment.Status.LEASED and taken.unit_id != given.unit_id
    assert page.errors == []


@pytest.fixture
def mturk_frame(settings):
    """A stand-in for MTurk's worker page on another site (localhost, the pages being on
    127.0.0.1), framing the task as an ExternalQuestion does: GET /?src=<task URL>."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread
    from urllib.parse import parse_qs, urlsplit

    from django.utils.html import escape

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            src = parse_qs(urlsplit(self.path).query)["src"][0]
            body = (f'<!doctype html><meta name="viewport" content="width=device-width">'
                    f'<body style="margin:0"><iframe src="{escape(src)}" title="HIT" '
                    f'style="border:0;width:100%;height:100vh"></iframe>')
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://localhost:{server.server_address[1]}"
    settings.ANNOTATOR_FRAME_ANCESTORS = [origin]
    yield origin
    server.shutdown()
    server.server_close()


def test_the_lease_notice_shows_inside_mturks_iframe_on_a_phone(page, live_server, settings, external_submit,
                                                               mturk_frame):
    from urllib.parse import quote

    from tests.frontend_support import unit_url

    settings.LEASE_IDLE_MINUTES = 0.1  # six seconds
    settings.LEASE_WARNING_SECONDS = 4
    origin, _ = external_submit
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{mturk_frame}/?src={quote(live_server.url + unit_url(caption_unit(), turk_submit_to=origin))}")
    task = page.frame_locator("iframe")
    task.locator(WARNING).wait_for(timeout=10000)
    task.locator(LAPSED).wait_for(timeout=10000)
    assert Assignment.objects.get().lease_expires_at <= timezone.now() + timedelta(seconds=1)
    shot(page, "lapsed-mturk-iframe-390")
    assert page.errors == []
