"""Issue 27's journey, clicked through in headless Chromium with a real Celery worker: a researcher
imports a third model's predictions into a family's verified sheet, sets up a tournament with two
endpoint models, has their answers generated, launches it; three in-house annotators judge every
battle on the real pairwise page (one page per judgement, by keyboard, as they would); the
researcher adds a caption judge run and a vision judge run (Judge runs › Add), and reads the judge
report on the leaderboard page with both runs side by side.

Every model is an OpenAI-compatible server on loopback (tests/openai_fake.py), one per endpoint
model and one for the judge, so the request bodies can be read: the vision judge's carry the
images, the caption judge's only text. The fakes answer by rule, so the report has something to
find: the caption judge always prefers the answer shown first (position bias), the vision judge
always the longer answer (length bias).

The screenshot lands in docs/screenshots/judge-report-journey.png.
"""

import csv
import io
import os
import re
import time

import pytest
from django.contrib.auth import get_user_model

from annotation.models import HumanJudgement, JudgeRun, ModelResponse, Reference, Tournament
from tests.factories import FamilyFactory, ReferenceFactory
from tests.openai_fake import FakeOpenAI, completion
from tests.paths import DOCS_SCREENSHOTS
from tests.scoring_factories import verified_instance

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCREENSHOT = DOCS_SCREENSHOTS / "judge-report-journey.png"
KEY_ENV = "CROWDBENCH_TEST_ENDPOINT_KEY"
ANNOTATOR_PASSWORD = "annotate-me-42"
REFERENCE = "A cat has fallen asleep on a laptop keyboard, an odd place for a nap."
# Each model answers every instance the same way; their lengths differ (6, 13 and 21 tokens, the
# reference 15), so every battle has a longer answer.
ANSWERS = {
    "llava-next": "A cat asleep on a keyboard.",
    "minigpt-4": "The picture shows a cat that has fallen asleep on a computer keyboard.",
    "qwen-vl": ("A grey tabby cat is asleep across a laptop keyboard, its paws stretched over the keys, "
                "next to a mug of tea."),
    "human-verified reference": REFERENCE,
}
# The crowd's taste, best first; the third annotator always picks Assistant 1, so some battles are
# decided 3/3 and others 2/3.
PREFERENCE = ["human-verified reference", "qwen-vl", "minigpt-4", "llava-next"]
CAPTION_JUDGE, VISION_JUDGE = "gpt-4", "gpt-4o"
# How much longer an answer must be for the caption judge to notice; nearer, it takes the first.
NOTICED_TOKENS = 5
_CAPTION_RESPONSES = re.compile(r"Response A: (.*)\nResponse B: (.*)\nThink step-by-step", re.DOTALL)
_VISION_RESPONSES = re.compile(r"Assistant 1 Response: (.*?)\n\nAssistant 2 Response: (.*?)\n\n", re.DOTALL)


def judge_by_rule(body):
    """The caption judge prefers the longer answer where it is clearly longer, else the one shown
    first (length and position bias); the vision judge prefers what the crowd prefers."""
    if body["model"] == CAPTION_JUDGE:
        first, second = _CAPTION_RESPONSES.search(body["messages"][-1]["content"]).groups()
        longer_by = len(second.split()) - len(first.split())
        verdict = "B" if longer_by > NOTICED_TOKENS else "A"
        return completion(f"Both describe the cat.\nOverall, Response {verdict} is better.", model=CAPTION_JUDGE)
    texts = "".join(part["text"] for part in body["messages"][0]["content"] if part["type"] == "text")
    model_of = {text: model for model, text in ANSWERS.items()}
    first, second = (model_of[text.strip()] for text in _VISION_RESPONSES.search(texts).groups())
    better = 1 if PREFERENCE.index(first) < PREFERENCE.index(second) else 2
    # CHIRP's GPT-4V answered with the assistant's number alone.
    return completion(f"Assistant {better}", model=VISION_JUDGE)


@pytest.fixture
def endpoint_servers():
    servers = {name: FakeOpenAI(default=completion(ANSWERS[name], prompt_tokens=800, completion_tokens=30,
                                                   model=name)).start()
               for name in ("llava-next", "qwen-vl")}
    yield servers
    for server in servers.values():
        server.stop()


def verified_sheet_with_predictions(page, tmp_path):
    """The family's verified sheet, downloaded from the import page, with a prediction column added
    as the model's authors name it."""
    with page.expect_download() as download:
        page.locator("ul.family-sheets a").first.click()
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text(encoding="utf-8-sig"))))
    path = tmp_path / "minigpt-4_13b.csv"
    with path.open("w", newline="", encoding="utf-8") as sheet:
        writer = csv.DictWriter(sheet, fieldnames=[*rows[0], "MiniGPT-4 prediction"])
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "MiniGPT-4 prediction": ANSWERS["minigpt-4"]})
    return path


def judge_every_battle(browser, live_server, username, *, always_left=False):
    """An in-house annotator signs in and judges every battle offered, by keyboard."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{live_server.url}/work/")
    page.fill("#id_username", username)
    page.fill("#id_password", ANNOTATOR_PASSWORD)
    page.click("button[type=submit]")
    page.click("a:has-text('Start') >> nth=0")
    model_of = {text: model for model, text in ANSWERS.items()}
    judged = 0
    while True:
        page.locator("form[data-ready], h1:has-text('Nothing waiting')").first.wait_for(state="attached")
        if page.locator("h1:has-text('Nothing waiting')").count():
            break
        left, right = (model_of[page.locator(f"[data-response={side}]").inner_text()] for side in ("left", "right"))
        prefers_left = always_left or PREFERENCE.index(left) < PREFERENCE.index(right)
        page.keyboard.press("1" if prefers_left else "2")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        judged += 1
    context.close()
    assert errors == []
    return judged


def add_judge_run(page, live_server, tournament, *, engine, mode):
    page.goto(f"{live_server.url}/admin/annotation/judgerun/add/")
    page.select_option("#id_tournament", str(tournament.pk))
    page.fill("#id_engine", engine)
    page.select_option("#id_mode", mode)
    page.get_by_role("button", name="Save", exact=True).click()
    page.locator("ul.messagelist").wait_for()


def test_two_endpoint_models_and_a_predictions_file_judged_by_the_crowd_and_two_judges_side_by_side(
        browser, live_server, researcher_page, start_worker, judge_server, endpoint_servers, tmp_path,
        monkeypatch):
    page = researcher_page
    family = FamilyFactory(name="Unusual pictures")
    for n in range(3):
        instance = verified_instance(family=family, instruction=f"What is unusual in picture {n}?",
                                     caption=["A grey tabby cat sleeps on the keys of an open laptop beside a mug."],
                                     reference_output=REFERENCE)
        # The verifiers' verdict, which puts the instance in its family's verified sheet.
        ReferenceFactory(instance=instance, caption=instance.current_caption, text=REFERENCE,
                         verdict=Reference.Verdict.CORRECT, decided_by=Reference.DecidedBy.VOTES,
                         decided_at=instance.created_at)
    for username in ("ann", "ben", "cy"):
        get_user_model().objects.create_user(username, password=ANNOTATOR_PASSWORD)
    monkeypatch.setenv(KEY_ENV, "endpoint-key")
    judge_server.responder = judge_by_rule
    worker = start_worker(**{KEY_ENV: "endpoint-key", "JUDGE_BASE_URL": judge_server.base_url,
                             "JUDGE_API_KEY": "judge-key", "JUDGE_MODEL": CAPTION_JUDGE})

    # The third model's predictions: the family's verified sheet with a column added, imported under
    # the name the researcher gives it (the file's column says "MiniGPT-4").
    page.goto(f"{live_server.url}/admin/annotation/modelresponse/import-predictions/")
    sheet = verified_sheet_with_predictions(page, tmp_path)
    page.set_input_files("#id_predictions", str(sheet))
    page.fill("#id_model_name", "minigpt-4")
    page.get_by_role("button", name="Import").click()
    assert "3 prediction(s) imported" in page.locator("ul.messagelist").inner_text()

    # The tournament, with two endpoint models.
    page.goto(f"{live_server.url}/admin/annotation/tournament/add/")
    page.fill("#id_name", "Cats on keyboards")
    page.fill("#id_judgements_per_pair", "3")
    for index, name in enumerate(endpoint_servers):
        if not page.locator(f'input[name="endpoint_models-{index}-model_name"]').count():
            page.get_by_text("Add another endpoint model").click()
        page.fill(f'input[name="endpoint_models-{index}-model_name"]', name)
        page.fill(f'input[name="endpoint_models-{index}-base_url"]', endpoint_servers[name].base_url)
        page.fill(f'input[name="endpoint_models-{index}-model"]', name)
        page.fill(f'input[name="endpoint_models-{index}-api_key_env"]', KEY_ENV)
    page.get_by_role("button", name="Save", exact=True).click()
    tournament = Tournament.objects.get()
    page.wait_for_url(f"{live_server.url}/admin/annotation/tournament/{tournament.pk}/workflow/")
    assert "1 model" in page.locator('[data-step="predictions"]').inner_text()

    # Answers generated by the worker; the workflow page follows them by itself.
    page.get_by_role("button", name="Generate answers").click()
    page.get_by_role("button", name="Sample battles").wait_for(timeout=60_000)
    answers = page.locator('[data-step="answers"]').inner_text()
    assert "llava-next: 3 of 3" in answers and "qwen-vl: 3 of 3" in answers
    page.get_by_role("button", name="Sample battles").click()
    # All pairs of four models (three and the verified reference) on each of the three instances.
    page.get_by_role("button", name="Launch the tournament (18 battles)").click()
    page.locator('[data-step="launched"].state-done').wait_for()

    # The crowd, on the annotators' pairwise page.
    judged = [judge_every_battle(browser, live_server, "ann"), judge_every_battle(browser, live_server, "ben"),
              judge_every_battle(browser, live_server, "cy", always_left=True)]
    assert judged == [18, 18, 18]
    assert HumanJudgement.objects.filter(battle__tournament=tournament).count() == 54

    # Two judges of the same battles, added beside each other.
    add_judge_run(page, live_server, tournament, engine=CAPTION_JUDGE, mode=JudgeRun.Mode.REFERENCE_BACKED)
    add_judge_run(page, live_server, tournament, engine=VISION_JUDGE, mode=JudgeRun.Mode.VISION)
    page.goto(f"{live_server.url}/admin/annotation/tournament/{tournament.pk}/workflow/")
    page.locator('[data-step="judge"]:has-text("2 runs done")').wait_for(timeout=120_000)

    # The leaderboard, once the worker has computed it from every judgement.
    page.locator('[data-step="leaderboard"] a').click()
    deadline = time.monotonic() + 120
    while not page.locator('p.computed[data-status="current"]').count() or \
            page.locator("table.judge-report thead th.evaluator").count() < 3:
        assert time.monotonic() < deadline, f"the leaderboard never became current:\n{worker.log()}"
        time.sleep(1)
        page.reload()
    report = page.locator("table.judge-report")
    # An evaluator per column, a measure per row: the two judges side by side, beside the crowd.
    evaluators = report.locator("thead th.evaluator").all_inner_texts()
    assert [heading.split("\n")[0] for heading in evaluators] == ["Human judgements", CAPTION_JUDGE, VISION_JUDGE]
    assert "Text, reference-backed (paper Fig. 17)" in evaluators[1]
    assert "Vision, images attached (CHIRP GPT-4V)" in evaluators[2]
    measures = {}
    for index in range(report.locator("tbody tr").count()):
        row = report.locator("tbody tr").nth(index)
        measures[row.locator("th").inner_text()] = row.locator("td").all_inner_texts()
    _, caption, vision = ({measure: cells[column] for measure, cells in measures.items()} for column in range(3))
    # Both orderings of 18 battles each, and what each fake judge leans on, found by the report: the
    # caption judge changes its verdict with the order only between the reference and minigpt-4 (two
    # tokens apart), 3 battles of 18; the vision judge never, and so names the first answer half the time.
    assert caption["Verdicts"] == vision["Verdicts"] == "36"
    assert caption["Verdict flips on swap"].startswith("16.7%\n") and caption["Verdict flips on swap"].endswith("n=18")
    assert vision["Verdict flips on swap"].startswith("0.0%\n") and vision["First-position wins"].startswith("50.0%\n")
    # Where the answers' lengths differ by more than NOTICED_TOKENS (5 of the 6 pairs) the longer wins,
    # and between the reference and minigpt-4 the first shown: 33 of 36.
    assert caption["Longer answer wins"].startswith("91.7%\n")
    for judge in (caption, vision):
        assert re.search(r"^3/3 \d+\.\d%\n.+, n=\d+$", judge["Agreement with the crowd majority, by strength"], re.M)
        assert re.fullmatch(r"Unusual pictures -?\d\.\d\d\nn=54", judge["Cohen's κ per category"])
        assert re.fullmatch(r"-?\d\.\d\d\nover 4 models", judge["Spearman of Elo with the crowd's"])
        assert judge["Cost (USD)"].startswith("$") and judge["Self-preference"] == "not a contestant"
    agreement = page.locator("table.agreement tbody tr").all_inner_texts()
    assert len(agreement) == 2 and all(re.search(r"\t\d+\.\d%\t", row) for row in agreement)

    # What each judge was sent: the vision judge saw the images, the caption judge only text.
    judged_by = {CAPTION_JUDGE: [], VISION_JUDGE: []}
    for request in judge_server.requests:
        judged_by[request.body["model"]].append(request.body)
    assert len(judged_by[CAPTION_JUDGE]) == len(judged_by[VISION_JUDGE]) == 36
    for body in judged_by[VISION_JUDGE]:
        assert [part["type"] for part in body["messages"][0]["content"]] == ["text", "image_url", "text"]
        assert body["messages"][0]["content"][1]["image_url"]["url"]
    for body in judged_by[CAPTION_JUDGE]:
        assert all(isinstance(message["content"], str) for message in body["messages"])
        assert "Image context: A grey tabby cat sleeps" in body["messages"][-1]["content"]
    # The endpoint models were asked with the images too, once per instance.
    for name, server in endpoint_servers.items():
        assert len(server.requests) == 3
        assert all(any(part["type"] == "image_url" for part in request.body["messages"][0]["content"])
                   for request in server.requests)
        assert ModelResponse.objects.filter(model_name=name).count() == 3

    # Every figure loaded (each one that loads moves what is below it), then the report measured.
    images = page.locator("img.plot")
    for index in range(images.count()):
        images.nth(index).scroll_into_view_if_needed()
        page.wait_for_function("(img) => img.complete && img.naturalWidth > 0",
                               arg=images.nth(index).element_handle(), timeout=60_000)
    page.evaluate("window.scrollTo(0, 0)")
    top = page.locator("#judge-report").bounding_box()["y"] - 10
    box = page.locator("#judge-report ~ img.plot").first.bounding_box()
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True,
                    clip={"x": 0, "y": top, "width": 1280, "height": box["y"] + box["height"] + 10 - top})
    assert page.errors == []
