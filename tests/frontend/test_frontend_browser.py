"""The annotator pages in headless Chromium against a live server.

Each test walks a page the way a worker would: MTurk preview and accept, a study link to its
completion code, keyboard only, a reload, a double click, a worker's HTML in someone else's page.
Screenshots land in test-artifacts/screenshots/.
"""

import os
import shutil
import subprocess
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model

from annotation.models import (
    Assignment,
    Caption,
    GoldItem,
    HumanJudgement,
    Instance,
    QualificationAttempt,
    Stage,
    Verification,
    Worker,
    WorkerQualification,
)
from frontend.arrival import ARRIVALS_COOKIE, PARTICIPANTS_COOKIE
from tests.factories import launch
from tests.frontend_support import (
    LONG_RESPONSE,
    XSS_INSTRUCTION,
    XSS_RESPONSE,
    caption_unit,
    confirmed_by_sync,
    instruction_unit,
    pairwise_unit,
    preview_url,
    qualification_test,
    study,
    unit_url,
    verification_unit,
)
from tests.paths import ARTIFACTS, SCREENSHOTS

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE_DIR = ARTIFACTS / "axe"
CAPTION = "A white cup of coffee with latte art in the shape of a heart, on a white saucer, steam rising."


def shoot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def axe_source():
    """axe-core from npm, installed once into test-artifacts/ (gitignored); None when offline."""
    script = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists() and shutil.which("npm"):
        AXE_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        str(AXE_DIR), "axe-core@4"], check=False, timeout=180,
                       capture_output=True)
    return script.read_text() if script.exists() else None


# Used when axe-core cannot be installed: every control has a label, and text contrast is AA.
_OWN_CHECKS = """() => {
  const problems = [];
  for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
    const named = (el.labels && el.labels.length) || el.getAttribute('aria-label')
      || el.getAttribute('aria-labelledby');
    if (!named) problems.push('unlabelled ' + (el.name || el.id));
  }
  const lum = c => { const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map(v => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const bg = el => { for (; el; el = el.parentElement) { const c = getComputedStyle(el).backgroundColor;
    if (c && !c.startsWith('rgba(0, 0, 0, 0)') && c !== 'transparent') return c; } return 'rgb(255,255,255)'; };
  for (const el of document.querySelectorAll('body *')) {
    if (!el.childNodes.length || ![...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) continue;
    if (!el.offsetParent) continue;
    const [a, b] = [lum(getComputedStyle(el).color), lum(bg(el))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) problems.push(
      'contrast ' + ratio.toFixed(2) + ' ' + el.tagName + ' ' + el.textContent.trim().slice(0, 30));
  }
  return problems;
}"""


def assert_accessible(page):
    source = axe_source()
    if source is None:
        assert page.evaluate(_OWN_CHECKS) == []
        return
    # Evaluated through DevTools: our own CSP rightly refuses an injected <script>.
    page.evaluate(f"() => {{ {source}\n}}")
    result = page.evaluate(
        "async () => (await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']})).violations"
        ".map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(', '))"
    )
    assert result == []


def test_mturk_preview_is_read_only(page, live_server):
    unit = caption_unit()
    page.goto(live_server.url + preview_url(unit))
    assert page.locator(".banner").inner_text().startswith("Preview.")
    assert page.locator("textarea[name=caption-0]").is_disabled()
    assert page.locator("[data-submit]").is_disabled()
    shoot(page, "caption-preview")
    assert not Assignment.objects.exists()
    assert page.errors == []


def test_mturk_accept_and_submit_hands_the_hit_back(page, live_server, external_submit):
    origin, received = external_submit
    unit = caption_unit()
    page.goto(live_server.url + unit_url(unit, assignment_id="3ASG", worker_id="AWORKER",
                                         turk_submit_to=origin))
    page.locator(".gallery img").first.wait_for()
    page.fill("textarea[name=caption-0]", CAPTION)
    assert "enough" in page.locator("[data-counter-for=caption-0]").inner_text()
    shoot(page, "caption")
    assert_accessible(page)
    page.click("[data-submit]")
    page.wait_for_url(f"{origin}/mturk/externalSubmit")
    caption = Caption.objects.get()
    assert caption.texts == [CAPTION]
    assert received == [("/mturk/externalSubmit",
                         {"assignmentId": "3ASG", "submission": f"caption-{caption.pk}"})]
    assert caption.assignment.platform_assignment_id == "3ASG"
    assert caption.assignment.active_seconds is not None
    assert page.errors == []


def test_verification_by_keyboard_through_a_cloudresearch_study_to_the_completion_code(
        page, live_server):
    first, second = verification_unit(), verification_unit(photos=("coffee", "chelsea"))
    study(platform=Worker.Platform.CLOUDRESEARCH, stage=Stage.VERIFICATION, external_id="PRJ7",
          code="CRDONE7")
    returned = []
    page.route("https://connect.cloudresearch.com/**", lambda route: (
        returned.append(route.request.url),
        route.fulfill(status=200, content_type="text/html", body="<title>Connect</title>done"),
    ))
    query = urlencode({"participantId": "CR-P1", "assignmentId": "CR-A1", "projectId": "PRJ7"})
    page.goto(f"{live_server.url}/work/{Stage.VERIFICATION}/?{query}")
    page.locator("form[data-ready]").wait_for(state="attached")
    assert page.locator("[data-show-when]").is_hidden()
    shoot(page, "verification")
    assert_accessible(page)

    page.keyboard.press("2")
    page.keyboard.press("4")
    page.keyboard.press("6")
    assert page.locator("input[value=response]").is_checked()
    assert page.locator("input[name=harmful]").is_checked()
    page.keyboard.press("Enter")
    page.locator("text=1 done").wait_for()
    page.locator("form[data-ready]").wait_for(state="attached")
    page.keyboard.press("1")
    assert page.locator("[data-show-when]").is_hidden()
    page.keyboard.press("Enter")

    page.locator("[data-completion-code]").wait_for()
    assert page.locator("[data-completion-code]").inner_text() == "CRDONE7"
    shoot(page, "completion")
    page.wait_for_url("https://connect.cloudresearch.com/**", timeout=10_000)
    assert returned == ["https://connect.cloudresearch.com/participant/project/CRDONE7/complete"]
    answers = {v.reference.instance.work_units.get(stage=Stage.VERIFICATION).pk: v
               for v in Verification.objects.all()}
    assert (answers[first.pk].is_correct, answers[first.pk].problem_in_response,
            answers[first.pk].is_harmful) == (False, True, True)
    assert answers[second.pk].is_correct is True
    assert set(Assignment.objects.values_list("platform_assignment_id", "platform_listing_id")) == {
        ("CR-A1", "PRJ7")}
    assert page.errors == []


def test_prolific_participant_finishes_early_and_gets_the_code(page, live_server):
    caption_unit()
    caption_unit(photos=("chelsea",))
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION, external_id="STUDY9",
          code="PROCODE9")
    page.route("https://app.prolific.com/**", lambda route: route.fulfill(
        status=200, content_type="text/html", body="<title>Prolific</title>done"))
    query = urlencode({"PROLIFIC_PID": "PP1", "STUDY_ID": "STUDY9", "SESSION_ID": "SESS1"})
    page.goto(f"{live_server.url}/work/{Stage.CAPTION}/?{query}")
    page.fill("textarea[name=caption-0]", CAPTION)
    page.keyboard.press("Control+Enter")
    page.locator("text=Finish and get my code").wait_for()
    assert "PROLIFIC_PID" not in page.url
    page.click("text=Finish and get my code")
    assert page.locator("[data-completion-code]").inner_text() == "PROCODE9"
    page.wait_for_url("https://app.prolific.com/submissions/complete?cc=PROCODE9", timeout=10_000)
    assert Caption.objects.count() == 1
    # The second unit, on screen when they finished, is free for someone else at once.
    assert Assignment.objects.filter(status=Assignment.Status.RETURNED).count() == 1


def test_a_finished_prolific_participant_reopening_the_study_link_sees_the_code_again(
        page, live_server):
    caption_unit()
    caption_unit(photos=("chelsea",))
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION, external_id="STUDY9",
          code="PROCODE9")
    page.route("https://app.prolific.com/**", lambda route: route.fulfill(
        status=200, content_type="text/html", body="<title>Prolific</title>done"))
    link = f"{live_server.url}/work/{Stage.CAPTION}/?" + urlencode(
        {"PROLIFIC_PID": "PP1", "STUDY_ID": "STUDY9", "SESSION_ID": "SESS1"})
    page.goto(link)
    page.fill("textarea[name=caption-0]", CAPTION)
    page.keyboard.press("Control+Enter")
    page.click("text=Finish and get my code")
    page.wait_for_url("https://app.prolific.com/**", timeout=10_000)

    page.goto(link)
    assert page.locator("h1").inner_text() == "You have finished this study"
    assert page.locator("[data-completion-code]").inner_text() == "PROCODE9"
    assert "gives no more tasks" in page.locator("[data-no-more-tasks]").inner_text()
    assert page.locator("textarea").count() == 0
    shoot(page, "completion-again")
    assert not Assignment.objects.filter(status=Assignment.Status.LEASED).exists()
    page.wait_for_url("https://app.prolific.com/submissions/complete?cc=PROCODE9", timeout=10_000)
    assert page.errors == []


def test_a_new_participant_whose_first_reply_was_cut_reloads_into_the_same_task(page, live_server):
    """Issue 38: the reply that tells a browser it holds a new participant is cut after their row
    and lease committed. The browser still shows the address it was loading, with the arrival token
    the study link redirected it to; a reload there opens the same task, with no platform API."""
    from playwright.sync_api import Error as PlaywrightError

    caption_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION, external_id="STUDY9", code="PROCODE9")
    link = f"{live_server.url}/work/{Stage.CAPTION}/?" + urlencode(
        {"PROLIFIC_PID": "PP1", "STUDY_ID": "STUDY9", "SESSION_ID": "SESS1"})
    # Playwright's routes never see a redirect's next request; Chromium's own interception does,
    # once the server has answered it.
    devtools = page.context.new_cdp_session(page)
    devtools.send("Fetch.enable", {"patterns": [{"urlPattern": "*arrival=*", "requestStage": "Response"}]})
    cut = []

    def cut_reply(event):
        cut.append(event["request"]["url"])
        devtools.send("Fetch.failRequest", {"requestId": event["requestId"], "errorReason": "ConnectionReset"})

    devtools.on("Fetch.requestPaused", cut_reply)
    with pytest.raises(PlaywrightError):
        page.goto(link)
    # Chromium then shows its error page for the cut reply, a navigation of its own: the reload
    # waits for it, or the error page would interrupt the reload (seen under load).
    page.wait_for_url(lambda url: url.startswith("chrome-error://"))
    devtools.send("Fetch.disable")
    # Nothing of the cut reply reaches the browser (Chromium keeps the cookies of a reply it then
    # fails, so the test takes them back); the redirect's, answered before, did.
    page.context.clear_cookies(name=PARTICIPANTS_COOKIE)
    assert ARRIVALS_COOKIE in {cookie["name"] for cookie in page.context.cookies()}
    assert len(cut) == 1 and Worker.objects.filter(external_id="PP1").count() == 1
    leased = Assignment.objects.get()

    page.goto(cut[0])  # the reload: the address the browser was loading

    page.locator("textarea[name=caption-0]").wait_for()
    assert Worker.objects.filter(external_id="PP1").count() == 1
    assert list(Assignment.objects.values_list("pk", flat=True)) == [leased.pk]
    page.fill("textarea[name=caption-0]", CAPTION)
    page.keyboard.press("Control+Enter")
    page.wait_for_url(lambda url: "after=saved" in url)
    assert Caption.objects.get().assignment.worker.external_id == "PP1"
    assert page.errors == []


def test_double_click_on_submit_stores_one_answer(page, live_server, external_submit):
    origin, received = external_submit
    unit = caption_unit()
    posts = []
    page.on("request", lambda request: request.method == "POST" and "/work/submit/" in request.url
            and posts.append(request.url))
    page.goto(live_server.url + unit_url(unit, turk_submit_to=origin))
    page.fill("textarea[name=caption-0]", CAPTION)
    page.dblclick("[data-submit]")
    page.wait_for_url(f"{origin}/mturk/externalSubmit")
    assert len(posts) == 1
    assert Caption.objects.count() == 1
    assert len(received) == 1


def test_reload_restores_the_draft_and_a_successful_submit_clears_it(page, live_server,
                                                                    external_submit):
    origin, _ = external_submit
    unit = verification_unit()
    url = live_server.url + unit_url(unit, turk_submit_to=origin)
    page.goto(url)
    page.check("input[value=incorrect]")
    page.check("input[value=caption]")
    page.fill("textarea[name=comment]", "The caption misses the helmet's colour.")
    page.reload()
    assert page.locator("input[value=incorrect]").is_checked()
    assert page.locator("input[value=caption]").is_checked()
    assert page.input_value("textarea[name=comment]") == "The caption misses the helmet's colour."
    assert "restored" in page.locator("[data-draft-note]").inner_text()
    assignment = Assignment.objects.get()
    key = f"crowdbench:draft:assignment-{assignment.pk}"
    page.click("[data-submit]")
    page.wait_for_url(f"{origin}/mturk/externalSubmit")
    page.goto(url)  # the same origin again, to read its storage
    assert page.evaluate("key => localStorage.getItem(key)", key) is None
    assert Verification.objects.get().comment == "The caption misses the helmet's colour."


def test_failed_submit_keeps_the_text_and_says_why(page, live_server, external_submit):
    origin, _ = external_submit
    unit = caption_unit()
    page.goto(live_server.url + unit_url(unit, turk_submit_to=origin))
    page.fill("textarea[name=caption-0]", "Too short")
    page.click("[data-submit]")
    assert "too short" in page.locator("[data-error]").inner_text()
    page.fill("textarea[name=caption-0]", CAPTION)
    page.route("**/work/submit/", lambda route: route.fulfill(status=500, body="oops"))
    page.click("[data-submit]")
    page.locator("[data-error]:has-text('error 500')").wait_for()
    assert page.input_value("textarea[name=caption-0]") == CAPTION
    assert page.locator("[data-submit]").is_enabled()
    assert not Caption.objects.exists()
    page.unroute("**/work/submit/")
    page.click("[data-submit]")
    page.wait_for_url(f"{origin}/mturk/externalSubmit")
    assert Caption.objects.get().texts == [CAPTION]


def test_in_house_annotator_writes_an_instruction_that_stays_inert_for_the_next_worker(
        page, live_server, browser, external_submit):
    origin, _ = external_submit
    unit = instruction_unit()
    launch(unit.family, Stage.CAPTION)
    get_user_model().objects.create_user("ann", password="annotate-me-42")
    page.goto(f"{live_server.url}/work/")
    page.fill("#id_username", "ann")
    page.fill("#id_password", "annotate-me-42")
    page.click("button[type=submit]")
    page.click("a:has-text('Start') >> nth=0")
    page.locator("#instruction").wait_for()
    shoot(page, "instruction-generation")
    assert_accessible(page)
    from fixtures.images import IMAGES
    from fixtures.loader import skimage_data_dir

    page.set_input_files("#image-0-file", str(skimage_data_dir() / IMAGES["coffee"].filename))
    page.select_option("#image-0-licence", "CC0 1.0")
    page.fill("#image-0-author", "me")
    page.fill("#instruction", XSS_INSTRUCTION)
    page.locator(".slot-preview img").wait_for()
    page.keyboard.press("Control+Enter")
    page.locator("text=Nothing waiting").wait_for()
    instance = Instance.objects.get()
    assert instance.instruction == XSS_INSTRUCTION
    assert instance.ordered_images()[0].file

    # The next worker, on MTurk, captions it: the instruction shows as text and runs nothing.
    caption = instance.work_units.get(stage=Stage.CAPTION)
    other = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    other.goto(live_server.url + unit_url(caption, turk_submit_to=origin))
    assert other.locator(".instruction-text").inner_text() == XSS_INSTRUCTION
    other.locator(".gallery img").first.wait_for()
    assert other.evaluate("window.__xss") is None
    assert other.locator(".task-material script, .task-material img[src=x]").count() == 0
    other.context.close()


def test_worker_page_and_phone_layout(page, live_server, external_submit):
    origin, _ = external_submit
    unit = verification_unit(photos=("astronaut", "camera"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + unit_url(unit, turk_submit_to=origin))
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shoot(page, "verification-phone")
    page.locator(".gallery img").first.click()
    assert page.locator("dialog[open] img").is_visible()
    page.keyboard.press("Escape")
    assert page.locator("dialog[open]").count() == 0
    page.check("input[value=correct]")
    page.click("[data-submit]")
    page.wait_for_url(f"{origin}/mturk/externalSubmit")

    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(live_server.url + unit_url(unit, turk_submit_to=origin))
    assert "already done" in page.content()
    from frontend.tokens import sign_worker

    done = Assignment.objects.get()
    confirmed_by_sync(done)
    page.goto(f"{live_server.url}/work/me/?w={sign_worker(done.worker_id, assignment_id=done.pk)}")
    assert "Verification" in page.locator("table").first.inner_text()
    shoot(page, "worker")
    assert_accessible(page)



# --- pairwise preference, the qualification test ----------------------------------------------

SHORT_RESPONSE = ("The cat is watching a bird outside the window: its ears point forward and its "
                  "eyes are fixed on one spot.")


def pane_texts(page):
    return (page.locator("[data-response=left]").inner_text(),
            page.locator("[data-response=right]").inner_text())


def test_pairwise_by_keyboard_with_criteria_and_rubric(page, live_server, external_submit):
    origin, received = external_submit
    unit = pairwise_unit(left_text=SHORT_RESPONSE, right_text=LONG_RESPONSE, with_criteria=True,
                         with_rubric=True)
    url = live_server.url + unit_url(unit, turk_submit_to=origin)
    page.goto(url)
    page.locator("form[data-ready]").wait_for(state="attached")
    page.locator(".gallery img").first.wait_for()
    left, right = pane_texts(page)
    assert {left, right} == {SHORT_RESPONSE, LONG_RESPONSE}
    # Equal panes side by side; the long response scrolls inside its own.
    boxes = [page.locator(f"[data-response={side}]").bounding_box() for side in ("left", "right")]
    assert boxes[0]["height"] == boxes[1]["height"] and boxes[0]["x"] < boxes[1]["x"]
    assert boxes[0]["y"] == boxes[1]["y"]
    long_side = "left" if left == LONG_RESPONSE else "right"
    assert page.evaluate(f"""() => {{ const pane = document.querySelector('[data-response={long_side}]');
                              return pane.scrollHeight > pane.clientHeight; }}""")

    # Overall, then the four criteria, then a score per response: each key answers the question
    # in focus and moves on to the next.
    for key in ("1", "2", "1", "2", "1", "4", "2"):
        page.keyboard.press(key)
    checked = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll(
        'form[data-task-form] input:checked')].map(input => [input.name, input.value]))""")
    assert checked == {"choice": "left", "criterion-relevance_and_completeness": "right",
                       "criterion-understanding_and_reasoning": "left",
                       "criterion-hallucination": "right", "criterion-detail": "left",
                       "score-left": "4", "score-right": "2"}
    assert page.evaluate("document.activeElement.matches('[data-submit]')")
    # Nothing to type, so nothing said of text kept as it is typed; the score keys are named by the
    # scores, not in the keyboard list of every battle.
    assert page.locator("[data-draft-note]").is_hidden()
    assert "keys 1 to 5" in page.locator("[id='score-left-text']").inner_text()
    assert "score" not in page.locator(".shortcuts").inner_text()
    page.evaluate("() => { window.scrollTo(0, 0); document.querySelector('.task-form').scrollTop = 0; }")
    shoot(page, "pairwise")
    assert_accessible(page)

    # A reload shows the same sides and keeps every choice.
    page.reload()
    page.locator("form[data-ready]").wait_for(state="attached")
    assert pane_texts(page) == (left, right)
    assert page.locator("input[name=score-left][value='4']").is_checked()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{origin}/mturk/externalSubmit")
    judgement = HumanJudgement.objects.select_related("battle__response_a",
                                                      "battle__response_b").get()
    assert received[0][1]["submission"] == f"judgement-{judgement.pk}"
    battle = judgement.battle
    on_left = battle.response_a if judgement.shown_left == HumanJudgement.ShownLeft.A \
        else battle.response_b
    assert on_left.text == left
    winner = battle.response_a if judgement.winner_side("left") == "model_a" else battle.response_b
    assert winner.text == left
    assert judgement.criteria == {"relevance_and_completeness": "right",
                                  "understanding_and_reasoning": "left",
                                  "hallucination": "right", "detail": "left"}
    assert judgement.rubric_scores == {"left": 4, "right": 2}
    assert page.errors == []


def test_pairwise_on_a_phone_stacks_the_responses(page, live_server, external_submit):
    origin, _ = external_submit
    unit = pairwise_unit(left_text=SHORT_RESPONSE, right_text=LONG_RESPONSE)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + unit_url(unit, turk_submit_to=origin))
    page.locator("form[data-ready]").wait_for(state="attached")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    first, second = (page.locator(f"[data-response={side}]").bounding_box()
                     for side in ("left", "right"))
    assert first["x"] == second["x"] and second["y"] > first["y"] + first["height"]
    shoot(page, "pairwise-phone")
    page.check("input[name=choice][value=right]")
    page.click("[data-submit]")
    page.wait_for_url(f"{origin}/mturk/externalSubmit")
    assert HumanJudgement.objects.get().choice == "right"


def test_a_model_response_with_html_stays_inert(page, live_server, external_submit):
    origin, _ = external_submit
    unit = pairwise_unit(left_text=XSS_RESPONSE, right_text=XSS_RESPONSE + " (two)")
    page.goto(live_server.url + unit_url(unit, turk_submit_to=origin))
    page.locator("form[data-ready]").wait_for(state="attached")
    assert XSS_RESPONSE in pane_texts(page)
    assert page.evaluate("window.__xss") is None
    assert page.locator(".responses script, .responses img, .responses a").count() == 0
    assert page.errors == []


def test_qualification_test_by_keyboard_with_feedback_then_live_work(page, live_server):
    qualification_test()
    verification_unit()
    study(platform=Worker.Platform.CLOUDRESEARCH, stage=Stage.VERIFICATION, external_id="PRJQ",
          code="QDONE")
    page.route("https://connect.cloudresearch.com/**", lambda route: route.fulfill(
        status=200, content_type="text/html", body="<title>Connect</title>done"))
    query = urlencode({"participantId": "CR-Q1", "assignmentId": "CR-QA", "projectId": "PRJQ"})
    page.goto(f"{live_server.url}/work/{Stage.VERIFICATION}/?{query}")
    assert "/work/qualify/verification/" in page.url
    page.locator("form[data-ready]").wait_for(state="attached")
    assert page.locator("[data-item]").count() == 5
    shoot(page, "qualification")
    assert_accessible(page)

    attempt = QualificationAttempt.objects.get()
    items = GoldItem.objects.in_bulk(attempt.item_ids)
    keys = ["1" if items[pk].answer == "correct" else "2" for pk in attempt.item_ids]
    keys[0] = "2" if keys[0] == "1" else "1"  # one wrong answer: still 80%, the pass mark
    for key in keys:
        page.keyboard.press(key)
    page.keyboard.press("Control+Enter")
    page.locator("[data-result=passed]").wait_for()
    assert "80% right" in page.locator("[data-score]").inner_text()
    assert page.locator("[data-feedback]").count() == 5
    assert page.locator("[data-expected]").count() == 1
    assert page.locator("[data-note]").count() == 5
    shoot(page, "qualification-result")
    assert_accessible(page)
    assert WorkerQualification.objects.get().worker.external_id == "CR-Q1"

    page.click("[data-continue]")
    page.locator("form[data-ready]").wait_for(state="attached")
    assert page.locator(".response-text").is_visible()
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    page.locator("[data-completion-code]").wait_for()
    assert Verification.objects.get().is_correct is True
    assert page.errors == []
