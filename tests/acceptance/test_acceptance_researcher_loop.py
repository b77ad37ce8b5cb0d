"""Issue 9's acceptance test: a researcher and three in-house annotators finish the whole loop in
the browser, from an empty database, clicking only what a person clicks.

The researcher creates a single-image family (its seed photo uploaded on the family form) and
launches it; one annotator writes an instruction about a photo they upload, another captions it,
the researcher pastes a reference (no reference model is configured), the third annotator verifies
it. The researcher exports the verified sheet, adds a "<model> prediction" column for two models
to that very file and imports it; samples battles and launches the tournament; all three annotators
compare responses; the LLM judge (a loopback OpenAI-compatible server) judges the same battles;
the leaderboard shows Elo and Bradley-Terry with intervals and the judge's agreement with the
crowd; a snapshot is built and every file downloads through its link and reads in pandas.

Background jobs (work units, the judge, snapshots) run in a real Celery worker process on the
test database; the site is Django's live server.
"""

import io
import os
import re
import time
from urllib.parse import urljoin

import pandas as pd
import pytest
from django.core.management import call_command
from django.db import connection
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from annotation.scoring import MIN_RATED_MATCHES
from crowdbench.celery import app
from fixtures.images import IMAGES
from fixtures.loader import skimage_data_dir
from tests.celery_support import CeleryWorker
from tests.openai_fake import FakeOpenAI, completion
from tests.paths import SCREENSHOTS

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Background jobs and the bootstrap behind the leaderboard on a busy two-core machine.
JOB_TIMEOUT_MS = 90_000
ANNOTATOR_PASSWORD = "annotate-in-house-42"

SEED_INSTRUCTION = "Why is the cat sitting so still? What might it be watching?"
SEED_RESPONSE = "It is probably watching a bird or an insect just outside the frame."
INSTRUCTION = "Is this drink hot or cold? Explain which details in the photo show it."
CAPTION = ("A white porcelain cup of coffee with latte art in the shape of a heart sits on a white "
           "saucer on a wooden table. A faint wisp of steam rises from the surface of the coffee.")
REFERENCE = ("It is hot. Steam is rising from the cup, and the milk foam still holds a crisp "
             "latte-art heart, which only forms on freshly poured hot coffee.")
# Two models' answers, worse than the reference and worse than each other; the loopback judge
# prefers the longer answer, so its ranking is the same as the crowd's majority.
PREDICTIONS = {
    "llava-1.5": "Hot: there is a little steam above the cup.",
    "otter": "Cold.",
}
QUALITY = [REFERENCE, PREDICTIONS["llava-1.5"], PREDICTIONS["otter"]]


class LongerAnswerJudge(FakeOpenAI):
    """The loopback judge: says the longer of the two responses is better, in both orderings."""

    PAIR = re.compile(r"Response A: (?P<a>.*)\nResponse B: (?P<b>.*?)\n", re.DOTALL)

    def _next_response(self, request):
        with self._lock:
            self.requests.append(request)
        prompt = request.body["messages"][-1]["content"]
        match = self.PAIR.search(prompt)
        winner = "A" if len(match["a"].strip()) >= len(match["b"].strip()) else "B"
        return completion(f"Both address the instruction.\nOverall, Response {winner} is better.")


# --- the people ------------------------------------------------------------------------------------


class Person:
    def __init__(self, browser, base_url, name):
        self.name = name
        self.base_url = base_url
        self.context = browser.new_context(viewport={"width": 1280, "height": 900},
                                           accept_downloads=True)
        self.page = self.context.new_page()
        self.errors = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("response", self._note_server_error)

    def _note_server_error(self, response):
        if response.status >= 500:
            self.errors.append(f"{response.status} {response.url}")

    def open(self, path):
        self.page.goto(self.base_url + path)

    def shoot(self, name):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


class Researcher(Person):
    def log_in(self, username, password):
        self.open("/admin/login/")
        self.page.get_by_label("Username").fill(username)
        self.page.get_by_label("Password").fill(password)
        self.page.get_by_role("button", name="Log in").click()
        self.page.get_by_text("Site administration").wait_for()

    def messages(self):
        return self.page.locator(".messagelist li").all_inner_texts()

    def press(self, button):
        """Click a button that posts a form, and wait for the page the server answers with."""
        with self.page.expect_navigation():
            button.click()

    def add_annotator(self, username):
        """An in-house annotator's account, made on the admin's user pages."""
        self.open("/admin/auth/user/add/")
        self.page.get_by_label("Username").fill(username)
        self.page.locator("#id_password1").fill(ANNOTATOR_PASSWORD)
        self.page.locator("#id_password2").fill(ANNOTATOR_PASSWORD)
        self.page.get_by_role("button", name="Save", exact=True).click()
        expect(self.page.locator(".messagelist")).to_contain_text(f"“{username}” was added successfully")

    def create_family(self, *, name, seed_photo):
        self.open("/admin/annotation/instructionfamily/add/")
        page = self.page
        page.get_by_label("Name:", exact=True).fill(name)
        page.get_by_label("Description:", exact=True).fill("Questions about what is going on in a photo and why.")
        page.get_by_label("Skill tags:", exact=True).fill("reasoning, commonsense")
        page.get_by_label("Target instances:", exact=True).fill("1")
        page.get_by_label("Seed instruction:", exact=True).fill(SEED_INSTRUCTION)
        page.get_by_label("Seed response:", exact=True).fill(SEED_RESPONSE)
        spec = IMAGES[seed_photo]
        page.locator("input[name='seedimage_set-0-upload']").set_input_files(
            str(skimage_data_dir() / spec.filename))
        page.locator("input[name='seedimage_set-0-licence']").fill(spec.licence)
        page.locator("input[name='seedimage_set-0-author']").fill(spec.author)
        page.get_by_role("button", name="Save", exact=True).click()
        page.get_by_role("heading", name="Next").wait_for()
        self.family_workflow = page.url.removeprefix(self.base_url)

    def next_action(self):
        return self.page.locator(".workflow-button")

    def click_next(self, label):
        """Click the workflow page's one next-action button, which must say `label`.

        The page reloads itself when a job or an annotator moves the workflow on; a click that
        such a reload swallows is made again, as a person would (the server refuses a stale one).
        """
        button = self.next_action().filter(has_text=label)
        button.wait_for(timeout=JOB_TIMEOUT_MS)
        for _ in range(3):
            try:
                with self.page.expect_navigation():
                    button.click()
                return
            except PlaywrightError as error:
                last_error = error
            self.page.wait_for_load_state()
            if not button.count():  # the click went through before the page reloaded
                return
        raise last_error

    def wait_for_next(self, label):
        # The workflow page refreshes itself as jobs and annotators finish.
        self.next_action().filter(has_text=label).wait_for(timeout=JOB_TIMEOUT_MS)

    def download(self, link, folder):
        folder.mkdir(parents=True, exist_ok=True)
        with self.page.expect_download() as started:
            link.click()
        download = started.value
        assert download.failure() is None, download.failure()
        target = folder / download.suggested_filename
        download.save_as(target)
        return target

    def export_sheet(self, folder, family):
        """The family's verified sheet, from the page the workflow sends the researcher to."""
        self.open(self.family_workflow)
        self.click_next("Import predictions")
        return self.download(self.page.get_by_role("link", name=f"{family}: single-image sheet"), folder)

    def import_predictions(self, path, *, rows, models):
        self.page.get_by_label("Predictions:", exact=True).set_input_files(str(path))
        self.press(self.page.get_by_role("button", name="Import", exact=True))
        # Every row matched: each of the sheet's rows gave one prediction per model.
        expect(self.page.locator(".messagelist")).to_contain_text(
            f"{rows * models} prediction(s) imported, 0 already there, from {models} model(s)")

    def create_tournament(self):
        self.open(self.family_workflow)
        self.click_next("Create a tournament")
        self.page.get_by_label("Sampling:", exact=True).select_option(label="All pairs of models on every instance")
        self.page.get_by_label("Judgements per pair:", exact=True).fill("3")
        self.page.get_by_role("button", name="Save", exact=True).click()
        self.open(self.family_workflow)
        self.click_next("Open the workflow of")

    def leaderboard(self):
        """The humans' board (header, counts line, rows) and the judges' agreement rows."""
        # The worker computes the leaderboard once the judge run has finished; until then the page
        # says it is computing (or shows the crowd's board alone, older than the judge's verdicts).
        clicked = time.monotonic()
        self.page.get_by_role("link", name="Open the leaderboard").click(timeout=JOB_TIMEOUT_MS)
        deadline = clicked + JOB_TIMEOUT_MS / 1000
        while self.page.locator(".computing").count():
            assert time.monotonic() < deadline, "the leaderboard was still being computed"
            time.sleep(1)
            self.page.reload()
        self.page.get_by_role("heading", name="Agreement of the judges with the crowd").wait_for()
        self.leaderboard_seconds = time.monotonic() - clicked
        # Its plots are drawn from the stored result: every one of them shows.
        plots = self.page.locator("img.plot")
        deadline = time.monotonic() + JOB_TIMEOUT_MS / 1000
        while not plots.evaluate_all("images => images.every(i => i.complete && i.naturalWidth > 0)"):
            assert time.monotonic() < deadline, "a leaderboard plot did not load"
            time.sleep(0.5)
        humans = self.page.locator("section.board").first
        expect(humans.get_by_role("heading")).to_have_text("Human judgements")
        board = {
            "header": humans.locator("thead th").all_inner_texts(),
            "counts": humans.locator(".counts").inner_text(),
            "rows": [row.locator("td").all_inner_texts() for row in humans.locator("tbody tr").all()],
            "agreement": [row.locator("td").all_inner_texts()
                          for row in self.page.locator("table.agreement tbody tr").all()],
        }
        self.shoot("acceptance-leaderboard")
        self.page.go_back()
        return board

    def download_snapshot(self, folder):
        self.click_next("Download Snapshot v")
        links = self.page.locator(".field-file_links a")
        names = links.all_inner_texts()
        assert names, self.page.inner_text("#content")
        # One file is saved by a real click. Twenty clicks in a row made Chromium's download
        # event miss one now and then, so the rest come through the browser's own logged-in
        # session, from the same links.
        files = {names[0]: self.download(links.first, folder / "0")}
        for index, name in enumerate(names[1:], start=1):
            response = self.page.request.get(urljoin(self.page.url, links.nth(index).get_attribute("href")))
            assert response.ok and "attachment" in response.headers["content-disposition"], name
            target = folder / str(index) / name.replace("/", "-")
            target.parent.mkdir(parents=True)
            target.write_bytes(response.body())
            files[name] = target
        return files


class Annotator(Person):
    def log_in(self):
        self.open("/work/login/")
        self.page.get_by_label("User name").fill(self.name)
        self.page.get_by_label("Password").fill(ANNOTATOR_PASSWORD)
        self.page.get_by_role("button", name="Log in").click()
        self.page.get_by_role("heading", name="Work waiting for you").wait_for()

    def start(self, task_title):
        self.open("/work/")
        card = self.page.locator("section, li, article, div").filter(
            has=self.page.get_by_text(task_title, exact=True)).last
        # The task's page, not the list it was opened from, is read next: a click returns before
        # the navigation it starts has finished, and a bare count() does not wait for anything.
        with self.page.expect_navigation():
            card.get_by_role("link", name="Start").click()

    def submit(self):
        with self.page.expect_navigation():
            self.page.get_by_role("button", name="Submit", exact=True).click()
        # The next page (another task or "nothing waiting") confirms the answer was kept.
        expect(self.page.get_by_text("Saved. Your answer is stored")).to_be_visible()

    def write_instruction(self, *, photo, instruction):
        self.start("Write a new instruction")
        spec = IMAGES[photo]
        self.page.get_by_label("Upload a photo").set_input_files(str(skimage_data_dir() / spec.filename))
        self.page.get_by_label("Licence").select_option(label=spec.licence)
        self.page.get_by_label("Author").fill(spec.author)
        self.page.get_by_label("Your new instruction").fill(instruction)
        self.submit()

    def caption(self, text):
        self.start("Describe the image for the instruction")
        assert INSTRUCTION in self.page.inner_text("main")
        self.page.get_by_label("Your caption").fill(text)
        self.submit()

    def verify(self, *, correct):
        self.start("Check the response")
        assert REFERENCE in self.page.inner_text("main")
        self.page.get_by_role("radio", name="Correct" if correct else "Incorrect", exact=True).check()
        self.submit()

    def compare_all(self, ranking):
        """Judge every pair waiting, preferring the response placed higher in `ranking`."""
        self.start("Compare two responses")
        judged = 0
        while self.page.locator("[data-response]").count():
            left = self.page.locator("[data-response='left']").inner_text().strip()
            right = self.page.locator("[data-response='right']").inner_text().strip()
            better = "Assistant 1" if ranking.index(left) < ranking.index(right) else "Assistant 2"
            self.page.get_by_role("radio", name=better).check()
            self.submit()
            judged += 1
        return judged


def read_with_pandas(path):
    name = path.name
    if name.endswith(".parquet"):
        return pd.read_parquet(path)
    if name.endswith(".jsonl"):
        return pd.read_json(path, lines=True) if path.stat().st_size else pd.DataFrame()
    if name.endswith(".csv"):
        return pd.read_csv(path, keep_default_na=False)
    if name.endswith("SHA256SUMS"):
        return pd.read_csv(path, sep=r"\s+", header=None, names=["sha256", "file"])
    if name.endswith(".json"):
        return pd.read_json(io.StringIO(path.read_text()), typ="series")
    if name.endswith(".md"):  # the dataset card: prose for people, not a table
        text = path.read_text()
        assert "v1" in text or "version" in text.lower(), text[:500]
        return text
    raise AssertionError(f"{name}: a snapshot file pandas has no reader for")


# --- fixtures --------------------------------------------------------------------------------------




@pytest.fixture
def judge():
    server = LongerAnswerJudge().start()
    yield server
    server.stop()


@pytest.fixture
def site(settings, tmp_path, judge, live_server):
    """The live server and a Celery worker sharing the test database, media and snapshot folders,
    with the LLM judge pointed at the loopback server and no reference model configured."""

    if connection.vendor != "postgresql" or not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs DATABASE_URL for PostgreSQL and CELERY_BROKER_URL for Redis (make test)")
    folders = {"MEDIA_ROOT": tmp_path / "media", "SNAPSHOTS_LOCATION": tmp_path / "snapshots"}
    settings.MEDIA_ROOT = folders["MEDIA_ROOT"]
    settings.STORAGES = {**settings.STORAGES,
                         "snapshots": {**settings.STORAGES["snapshots"],
                                       "OPTIONS": {"location": str(folders["SNAPSHOTS_LOCATION"])}}}
    judge_settings = {"JUDGE_BASE_URL": judge.base_url, "JUDGE_API_KEY": "judge-key",
                      "JUDGE_MODEL": "gpt-4", "JUDGE_FALLBACK_MODEL": ""}
    for name, value in judge_settings.items():
        setattr(settings, name, value)
    settings.OPENAI_REFERENCE_MODEL = ""
    app.conf.broker_url = settings.CELERY_BROKER_URL
    app.control.purge()
    worker = CeleryWorker(log_path=tmp_path / "worker.log", openai_base_url=judge.base_url,
                          OPENAI_REFERENCE_MODEL="", **judge_settings,
                          **{name: str(path) for name, path in folders.items()})
    worker.wait_for_log(" ready.")
    yield live_server.url, worker
    worker.stop()
    app.control.purge()


@pytest.fixture
def people(browser, site):
    """Makes the people of the test, each in their own browser; keeps a picture of where each of
    them stood at the end (test-artifacts/screenshots/acceptance-last-*.png), for a failure."""
    base_url, _ = site
    made = []

    def make(kind, name):
        made.append(kind(browser, base_url, name))
        return made[-1]

    yield make
    for person in made:
        person.shoot(f"acceptance-last-{person.name}")
        person.context.close()


# --- the loop --------------------------------------------------------------------------------------


def test_researcher_and_three_annotators_finish_the_loop(people, site, tmp_path, monkeypatch):
    base_url, worker = site
    started = time.monotonic()
    # The researcher's account is made as a deployment makes it (docs/operations.md: createsuperuser).
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "research-pw-42")
    call_command("createsuperuser", interactive=False, username="researcher",
                 email="researcher@example.org", verbosity=0)

    researcher = people(Researcher, "researcher")
    researcher.log_in("researcher", "research-pw-42")
    for name in ("amara", "bruno", "chen"):
        researcher.add_annotator(name)
    amara, bruno, chen = (people(Annotator, name) for name in ("amara", "bruno", "chen"))
    for annotator in (amara, bruno, chen):
        annotator.log_in()

    # A new single-image family with its seed photo uploaded on the family form, then launched.
    researcher.create_family(name="Hot or cold", seed_photo="chelsea")
    researcher.shoot("acceptance-family-new")
    for label in ("Launch instruction generation", "Launch captions", "Launch verification"):
        researcher.click_next(label)
    researcher.wait_for_next("See what annotators see")

    # One annotator writes an instruction about their own photo; another captions it.
    amara.write_instruction(photo="coffee", instruction=INSTRUCTION)
    bruno.caption(CAPTION)

    # No reference model is configured: the workflow asks for a reference pasted by hand.
    researcher.click_next("Paste a reference")
    assert CAPTION in researcher.page.inner_text("#content")
    researcher.page.get_by_label("Text:", exact=True).fill(REFERENCE)
    researcher.press(researcher.page.get_by_role("button", name=re.compile("Save|Add|Submit")))
    expect(researcher.page.locator(".messagelist")).to_contain_text("awaits verification")

    # The third annotator (who neither wrote the instruction nor the caption) verifies it.
    chen.verify(correct=True)

    # Export the family's verified sheet; add a prediction column per model to that very file.
    sheet = researcher.export_sheet(tmp_path, "Hot or cold")
    exported = pd.read_csv(sheet, keep_default_na=False)
    assert list(exported["instruction"]) == [INSTRUCTION]
    for model, text in PREDICTIONS.items():
        exported[f"{model} prediction"] = text
    predictions = tmp_path / "predictions.csv"
    exported.to_csv(predictions, index=False)
    researcher.import_predictions(predictions, rows=len(exported), models=len(PREDICTIONS))

    # The tournament: battles sampled when it is saved, then launched from its workflow.
    researcher.create_tournament()
    researcher.click_next("Launch the tournament")
    judged = {annotator.name: annotator.compare_all(ranking) for annotator, ranking in (
        (amara, QUALITY), (bruno, QUALITY), (chen, [QUALITY[1], QUALITY[0], QUALITY[2]]))}
    assert judged == {"amara": 3, "bruno": 3, "chen": 3}

    researcher.click_next("Run the LLM judge")
    researcher.wait_for_next("Build a snapshot")

    board = researcher.leaderboard()
    assert board["header"] == ["Category", "Model", "Elo", "95% interval", "Bradley-Terry", "95% interval",
                               "Matches", "Win-rate vs. reference (w/ # ratings)"]
    assert board["counts"].startswith("3 battles, 9 judgements (3 per battle)"), board["counts"]
    split = board["rows"][0][0]
    ratings = {row[1]: row for row in board["rows"] if row[0] == split}
    assert set(ratings) == {"human-verified reference", *PREDICTIONS}, board["rows"]
    for row in ratings.values():
        low, high = map(float, re.findall(r"-?\d+(?:\.\d+)?", row[3]))
        assert low <= high, row
        # 9 judgements give each model 6 matches, too few for a Bradley-Terry rating to say
        # more about the model than about its prior
        assert int(row[6].split()[-1]) < MIN_RATED_MATCHES and (row[4], row[5]) == ("not yet rated", ""), row
    # Otter's one-word answer lost every comparison, to the crowd and on Elo.
    assert min(ratings, key=lambda model: float(ratings[model][2])) == "otter", board["rows"]
    # The judge agrees with the crowd's majority on all three battles.
    [agreement] = board["agreement"]
    assert "gpt-4" in agreement[0] and agreement[1:4] == ["3", "3", "100.0%"], agreement
    researcher.click_next("Build a snapshot")
    researcher.wait_for_next("Download Snapshot v")
    files = researcher.download_snapshot(tmp_path / "downloads")
    tables = {name: read_with_pandas(path) for name, path in files.items()}
    assert len(tables["human_preferences.csv"]) == 9
    sheet_rows = tables["visit_bench_single_image.csv"]
    assert list(sheet_rows["instruction"]) == [INSTRUCTION]
    assert list(sheet_rows["reference_output"]) == [REFERENCE]

    for annotator in (amara, bruno, chen, researcher):
        assert annotator.errors == [], (annotator.name, annotator.errors)
    print(f"\nthe loop took {time.monotonic() - started:.0f} s (the leaderboard's first view "
          f"{researcher.leaderboard_seconds:.0f} s); files: {sorted(files)}")
