# ruff: noqa: F811 -- the fixtures imported from test_frontend_browser are named as parameters.
"""Issue 9.9 in headless Chromium: give a task back, see "saved", log out, "Your work" at 390 px,
and Swagger UI with no network beyond this site; the Back button to a submitted task."""

import os

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotation.models import Assignment
from tests.frontend_support import caption_unit, confirmed_by_sync, unit_url, verification_unit
from tests.paths import DOCS_SCREENSHOTS

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CAPTION = "A white cup of coffee with latte art in the shape of a heart, on a white saucer, steam rising."


def log_in(page, live_server, name="ann"):
    get_user_model().objects.create_user(name, password="annotate-me-42")
    page.goto(f"{live_server.url}/work/login/")
    page.fill("#id_username", name)
    page.fill("#id_password", "annotate-me-42")
    page.click("button[type=submit]")
    page.locator("text=Work waiting for you").wait_for()


def test_give_back_frees_the_slot_and_moves_on_then_a_submit_says_saved_then_log_out(page, live_server):
    caption_unit(), caption_unit()
    log_in(page, live_server)
    page.click("a:has-text('Start') >> nth=0")
    page.locator("#caption-0").wait_for()
    first = Assignment.objects.get()
    page.click("button:has-text('Give this task back')")
    page.locator("[data-notice]:has-text('Task given back')").wait_for()
    first.refresh_from_db()
    assert first.status == Assignment.Status.RETURNED
    page.click("button:has-text('Take the next task')")  # issue 38: taken only when asked
    page.fill("#caption-0", CAPTION)
    page.click("[data-submit]")
    page.locator("[data-notice]:has-text('Saved. Your answer is stored')").wait_for()
    # Nothing else is left, so the task given back comes back to them, as the same assignment.
    page.locator("#caption-0").wait_for()
    first.refresh_from_db()
    assert first.status == Assignment.Status.LEASED
    page.click("button:has-text('Give this task back')")
    page.click("button:has-text('Take the next task')")
    page.locator("text=Nothing waiting").wait_for()
    page.click("[data-logout]")
    page.locator("text=Log in to annotate").wait_for()
    page.goto(f"{live_server.url}/work/")
    assert "/work/login/" in page.url
    assert page.errors == []


def test_your_work_fits_a_390_pixel_phone(page, live_server, external_submit):
    origin, _ = external_submit
    unit = verification_unit(photos=("astronaut", "camera"))
    page.goto(live_server.url + unit_url(unit, turk_submit_to=origin))
    page.check("input[value=incorrect]")
    page.check("input[value=both]")
    page.fill("#comment", "The caption misses the second photo entirely; " * 3)
    page.click("[data-submit]")
    page.wait_for_url(f"{origin}/mturk/externalSubmit")
    done = Assignment.objects.get()
    confirmed_by_sync(done)
    from frontend.tokens import sign_worker

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/work/me/?w={sign_worker(done.worker_id, assignment_id=done.pk)}")
    page.locator("h1:has-text('Your work')").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS_SCREENSHOTS / "your-work-390.png"), full_page=True)


def test_swagger_ui_works_with_no_network_beyond_this_site(page, live_server):
    staff = get_user_model().objects.create_user("researcher", password="pw", is_staff=True,
                                                 is_superuser=True)
    assert staff.pk
    outside = []

    def only_this_site(route):
        if route.request.url.startswith(live_server.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_site)
    page.goto(f"{live_server.url}/admin/login/?next=/api/docs/")
    page.fill("#id_username", "researcher")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.locator(".swagger-ui .info .title:has-text('crowdbench API')").wait_for(timeout=15000)
    assert page.locator(".opblock").count() > 0
    assert outside == []


def test_give_back_is_on_every_stage_page(page, live_server):
    from tests.frontend_support import instruction_unit, pairwise_unit

    for unit in (instruction_unit(), caption_unit(), verification_unit(), pairwise_unit()):
        page.goto(live_server.url + unit_url(unit, assignment_id=f"3ASG{unit.pk:08d}"))
        assert page.locator("button:has-text('Give this task back')").is_visible(), unit.stage


def test_an_active_page_keeps_its_lease_and_an_idle_one_lets_it_lapse(page, live_server, settings):
    settings.LEASE_HEARTBEAT_SECONDS = 1
    settings.LEASE_IDLE_MINUTES = 0.05  # three seconds
    caption_unit()
    log_in(page, live_server)
    beats = []
    page.on("request", lambda request: beats.append(request.url) if request.url.endswith("/work/heartbeat/") else None)
    page.click("a:has-text('Start') >> nth=0")
    page.locator("#caption-0").wait_for()
    lease = Assignment.objects.get()
    for _ in range(6):  # six seconds of typing: twice the idle limit, the lease held throughout
        page.type("#caption-0", "A cup ")
        page.wait_for_timeout(1000)
    lease.refresh_from_db()
    assert len(beats) >= 3
    assert lease.status == Assignment.Status.LEASED and lease.lease_expires_at > timezone.now()
    page.wait_for_timeout(5000)  # no input: no sign of life, and the lease lapses
    lease.refresh_from_db()
    assert lease.lease_expires_at < timezone.now()
    assert page.errors == []


def test_the_back_button_shows_the_submitted_answer_counted_and_a_resubmit_says_the_first_is_kept(page, live_server):
    caption_unit(), caption_unit(), caption_unit()
    log_in(page, live_server)
    page.click("a:has-text('Start') >> nth=0")
    page.fill("#caption-0", CAPTION)
    page.click("[data-submit]")
    page.locator("[data-notice]:has-text('Saved. Your answer is stored')").wait_for()

    page.go_back()
    page.wait_for_load_state("load")
    assert page.input_value("#caption-0") == CAPTION  # Chromium puts the text back, and the counter counts it
    counter = page.locator("[data-counter-for='caption-0']").inner_text()
    assert counter.startswith(f"{len(CAPTION)} characters"), counter
    page.fill("#caption-0", "A changed caption: a small espresso in a glass cup on a steel counter.")
    page.click("[data-submit]")
    page.locator("[data-notice]:has-text('your first answer is kept')").wait_for()
    assert Assignment.objects.get(caption__isnull=False).caption.texts == [CAPTION]
    assert page.errors == []
