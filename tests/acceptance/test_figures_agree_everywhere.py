"""Every figure agrees with itself (issue 39): one world is built through the real services (a
family captioned, given GPT-4's references and verified by a Prolific study's participants through
the study link, a tournament judged by the crowd and by an LLM judge, a snapshot built), then each
figure in FIGURES is read from every place that shows it (a page's HTML, the API, the snapshot's
files, the event a webhook or e-mail carries, the domain's own computation) and every reading must
be the same.

A new figure on a page, an export or a message is added to FIGURES with a reader for each place it
appears; a reader that parses text compares the number it shows, not its formatting.
"""

import csv
import io
import json
import os
import random
import re
from dataclasses import dataclass
from decimal import Decimal
from html.parser import HTMLParser
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from scipy import stats

from annotation.collection.progress import table2
from annotation.collection.references import generate_reference
from annotation.crowdwork.queue import next_assignment
from annotation.crowdwork.stages import create_work_units
from annotation.datasets.snapshots import build_snapshot, open_snapshot_file, request_snapshot
from annotation.figures import dollars
from annotation.judging.runner import create_judge_run, run_judge
from annotation.models import HumanJudgement, Instance, JudgeRun, Stage, Worker
from annotation.models.benchmark import benchmark_instances
from annotation.preferences.judgements import battle_of, shown_left_for, submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring.freshness import refresh_leaderboard
from mturk.models import CrowdStudy
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, WorkerFactory, launch
from tests.openai_fake import completion
from tests.paths import SCREENSHOTS
from tests.scoring_factories import create_tournament, with_responses
from webhooks.models import Delivery

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

STUDY_ID = "60f6acb180a7b59ac0621f9e"
MODELS = ("llava-1.5", "instructblip", "otter")
# How likely a crowd worker prefers each response; the judge's own order swaps the two last.
CROWD_STRENGTH = {"human-verified reference": 0.8, "llava-1.5": 0.6, "instructblip": 0.45, "otter": 0.3}
JUDGE_ORDER = ("human-verified reference", "otter", "llava-1.5", "instructblip")
# Each participant's verdict on the reference they are given: one is wrong in its response.
VERDICTS = ("correct", "correct", "incorrect", "correct", "correct")
JSON = {"Accept": "application/json"}
# Four workers a battle: a 2-2 split has no majority, so the agreement's denominator (the battles
# with one) is not the battles shared.
CROWD_PER_BATTLE = 4
PASSWORD = "a-long-test-password"


# --- the world ---------------------------------------------------------------------------------


@dataclass
class World:
    family: object
    study: object
    tournament: object
    run: object
    snapshot: object
    researcher: object


def _references_by_gpt4(openai_server, family, count):
    """`count` captioned instances of `family`, each given GPT-4's candidate reference through the
    loopback OpenAI server, as the reference job does once a caption is in."""
    launch(family, Stage.VERIFICATION)
    for n in range(count):
        instance = InstanceFactory(family=family, status=Instance.Status.AWAITING_REFERENCE)
        instance.current_caption = CaptionFactory(instance=instance)
        instance.save()
        openai_server.script(completion(f"The bicycle is red ({n}): it leans against a blue door.",
                                        prompt_tokens=120, completion_tokens=40))
        generate_reference(instance=instance)


def _verified_through_the_study_link(study):
    """Each participant arrives by the Prolific study link and gives the reference shown its verdict."""
    for n, verdict in enumerate(VERDICTS):
        browser = Client()
        link = f"/work/{Stage.VERIFICATION}/?" + urlencode(
            {"PROLIFIC_PID": f"P{n}", "STUDY_ID": study.external_id, "SESSION_ID": f"S{n}"})
        page = browser.get(link, follow=True)
        assert page.context["assignment"] is not None, n
        answer = {"token": page.context["token"], "verdict": verdict}
        if verdict == "incorrect":
            answer["problem"] = "response"
        assert browser.post("/work/submit/", answer, headers=JSON).json()["ok"], n


def _judged_by_the_crowd(tournament):
    chance = random.Random(39)
    for _ in range(CROWD_PER_BATTLE):
        worker = WorkerFactory()
        while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
            battle = battle_of(assignment.unit)
            a, b = battle.response_a.model_name, battle.response_b.model_name
            prefers_a = chance.random() < CROWD_STRENGTH[a] / (CROWD_STRENGTH[a] + CROWD_STRENGTH[b])
            a_on_left = shown_left_for(assignment=assignment, tournament=tournament) == HumanJudgement.ShownLeft.A
            submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker,
                                      choice="left" if prefers_a == a_on_left else "right")


def _judge_by_order(texts):
    """The loopback judge's answer: the response whose model comes first in JUDGE_ORDER wins."""

    def respond(body):
        asked = body["messages"][-1]["content"]
        shown = re.search(r"Response A: (.*)\nResponse B: (.*)", asked)
        if shown is None:
            return None
        first, second = (JUDGE_ORDER.index(texts[text.strip()]) for text in shown.groups())
        return completion(f"Step 1: both read.\nOverall, Response {'A' if first < second else 'B'} is better.",
                          prompt_tokens=300, completion_tokens=60)

    return respond


def build_world(judge_server):
    """The world every figure is read from; the judge server also plays GPT-4 for the references."""
    family = FamilyFactory(name="Contextual knowledge of events")
    study = CrowdStudy.objects.create(platform=Worker.Platform.PROLIFIC, stage=Stage.VERIFICATION, family=family,
                                      name="Checking references", external_id=STUDY_ID,
                                      completion_code="C1ABCD23", reward_usd=Decimal("0.75"))
    _references_by_gpt4(judge_server, family, len(VERDICTS))
    create_work_units(family=family, stage=Stage.VERIFICATION)
    _verified_through_the_study_link(study)

    for instance in benchmark_instances().filter(family=family):
        with_responses(instance, *MODELS)
    tournament = create_tournament(name="Figures pilot", families=[family], judgements_per_pair=CROWD_PER_BATTLE)
    launch_tournament(tournament=tournament)
    _judged_by_the_crowd(tournament)
    texts = {battle_side.text.strip(): battle_side.model_name
             for battle in tournament.battles.select_related("response_a", "response_b")
             for battle_side in (battle.response_a, battle.response_b)}
    judge_server.responder = _judge_by_order(texts)
    run = run_judge(run=create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE, concurrency=1))
    # The background job's work once the judge run finished.
    refresh_leaderboard(tournament=tournament)

    researcher = get_user_model().objects.create_superuser("researcher", "researcher@example.org", PASSWORD)
    snapshot = request_snapshot(created_by=researcher, tournaments=[tournament], background=False)
    build_snapshot(snapshot=snapshot)
    snapshot.refresh_from_db()
    return World(family=family, study=study, tournament=tournament, run=run, snapshot=snapshot,
                 researcher=researcher)



# --- reading a page ----------------------------------------------------------------------------


class Element:
    def __init__(self, tag, attrs):
        self.tag, self.attrs, self.children, self.parts = tag, dict(attrs), [], []

    @property
    def text(self):
        """The element's text as a reader sees it: entities decoded, white space collapsed."""
        return " ".join("".join(part if isinstance(part, str) else part.text + " " for part in self.parts).split())

    def find_all(self, tag, **attrs):
        found = []
        for child in self.children:
            classes = child.attrs.get("class", "").split()
            if child.tag == tag and all(
                    value in classes if name == "class_" else child.attrs.get(name) == value
                    for name, value in attrs.items()):
                found.append(child)
            found.extend(child.find_all(tag, **attrs))
        return found

    def find(self, tag, **attrs):
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag} {attrs}> on the page"
        return found[0]

    def cells(self):
        return [cell.text for cell in self.children if cell.tag in ("td", "th")]


class _Tree(HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("document", {})
        self.open = [self.root]

    def handle_starttag(self, tag, attrs):
        element = Element(tag, [(name, value or "") for name, value in attrs])
        self.open[-1].children.append(element)
        self.open[-1].parts.append(element)
        if tag not in self.VOID:
            self.open.append(element)

    def handle_endtag(self, tag):
        for depth in range(len(self.open) - 1, 0, -1):
            if self.open[depth].tag == tag:
                del self.open[depth:]
                return

    def handle_data(self, data):
        self.open[-1].parts.append(data)


def parsed(response):
    assert response.status_code == 200, response.status_code
    tree = _Tree()
    tree.feed(response.content.decode())
    return tree.root


def number(text, pattern=r"(-?\d+(?:\.\d+)?)"):
    """The number `pattern`'s group finds in a page's text, as shown (a Decimal keeps its places)."""
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in {text!r}"
    return Decimal(found.group(1))


# --- the places a figure is read from ----------------------------------------------------------


class Places:
    """Each place of the world that shows figures, fetched once, as a researcher or a consumer of
    the API, the snapshot or the events gets it."""

    def __init__(self, world):
        self.world = world
        self.client = Client()
        self.client.force_login(world.researcher)
        self._cache = {}

    def _once(self, key, fetch):
        if key not in self._cache:
            self._cache[key] = fetch()
        return self._cache[key]

    def page(self, url):
        return self._once(url, lambda: parsed(self.client.get(url)))

    @property
    def leaderboard(self):
        return self.page(reverse("dashboard:leaderboard", args=[self.world.tournament.pk]))

    @property
    def dashboard(self):
        return self.page(reverse("dashboard:index"))

    @property
    def table2_page(self):
        return self.page(reverse("admin:annotation_instructionfamily_table2"))

    @property
    def workflow(self):
        return self.page(reverse("admin:annotation_instructionfamily_workflow", args=[self.world.family.pk]))

    @property
    def study_page(self):
        return self.page(reverse("admin:mturk_crowdstudy_change", args=[self.world.study.pk]))

    @property
    def study_list(self):
        return self.page(reverse("admin:mturk_crowdstudy_changelist"))

    @property
    def api(self):
        def fetch():
            response = self.client.get(f"/api/tournaments/{self.world.tournament.pk}/leaderboard/")
            assert response.status_code == 200, response.content
            return {board["key"]: board for board in response.json()}
        return self._once("api", fetch)

    def snapshot_file(self, name):
        def fetch():
            with open_snapshot_file(snapshot=self.world.snapshot, name=name) as handle:
                return handle.read().decode()
        return self._once(("snapshot", name), fetch)

    @property
    def manifest(self):
        return json.loads(self.snapshot_file("manifest.json"))

    @property
    def judge_report_json(self):
        (report,) = json.loads(self.snapshot_file("judge_report.json"))
        return {row["key"]: row for row in report["rows"]}

    @property
    def study_completed(self):
        """The study.completed event as the researchers' e-mail (a Delivery) carries it."""
        (delivery,) = Delivery.objects.filter(event="study.completed")
        return json.loads(json.dumps(delivery.payload))["data"]


# --- readers -------------------------------------------------------------------------------------

HUMAN, ALL_IMAGES = "human", "All images"


def run_key(places):
    return f"run-{places.world.run.pk}"


def page_elo(board_key, model):
    def read(places):
        rows = places.leaderboard.find("section", id=f"board-{board_key(places)}").find(
            "table", class_="leaderboard").find("tbody").find_all("tr")
        (elo,) = [cells[2] for cells in map(Element.cells, rows) if cells[:2] == [ALL_IMAGES, model]]
        return number(elo)
    return read


def api_elo(board_key, model):
    def read(places):
        (elo,) = [row["elo"] for row in places.api[board_key(places)]["rows"]
                  if row["split"] == "all-images" and row["model"] == model]
        return elo
    return read


def crowd(places):
    return HUMAN


def _page_agreement_cell(column):
    def read(places):
        table = places.leaderboard.find("table", class_="agreement")
        header = [cell.text for cell in table.find("thead").find("tr").children]
        (row,) = table.find("tbody").find_all("tr")
        return number(row.cells()[header.index(column)])
    return read


def _board_agreement(places):
    return places.leaderboard.find("section", id=f"board-{run_key(places)}").find("p", class_="agreement").text


def _report_cell(places, measure):
    """The judge run's cell of a judge report row, as lines of text."""
    row = places.leaderboard.find("table", class_="judge-report").find("tr", **{"data-measure": measure})
    columns = [th.attrs["data-key"] for th in places.leaderboard.find("table", class_="judge-report").find_all(
        "th", class_="evaluator")]
    cell = row.find_all("td")[columns.index(run_key(places))]
    return [line.text for line in cell.find_all("div", class_="line")]


def report_majority_all(places):
    (line,) = [line for line in _report_cell(places, "majority") if line.startswith("all ")]
    return line


def api_agreement(field):
    return lambda places: places.api[run_key(places)]["agreement"][field]


def _majority_all(row):
    (found,) = [found for found in row["majority"] if found["strength"] == "all"]
    return found


def scipy_over_the_shown_elo(places):
    """Spearman's rho computed here, by scipy, over the Elo the page's two boards show."""
    shown = {}
    for key in (HUMAN, run_key(places)):
        rows = places.leaderboard.find("section", id=f"board-{key}").find("table", class_="leaderboard").find(
            "tbody").find_all("tr")
        shown[key] = {cells[1]: float(cells[2]) for cells in map(Element.cells, rows) if cells[0] == ALL_IMAGES}
    models = sorted(shown[HUMAN])
    assert sorted(shown[run_key(places)]) == models
    return stats.spearmanr([shown[HUMAN][m] for m in models], [shown[run_key(places)][m] for m in models]).statistic


def table2_page(row_label):
    def read(places):
        rows = places.table2_page.find("div", id="content").find("table").find("tbody").find_all("tr")
        (cells,) = [cells for cells in map(Element.cells, rows) if cells[0] == row_label]
        return number(cells[1])  # Overall
    return read


def _workflow_step(places, step):
    return places.workflow.find("li", **{"data-step": step}).find("span", class_="workflow-counts").text


def _study_figures_field(places):
    return places.study_page.find("div", class_="field-figures").find("div", class_="readonly").text


def study_list_cell(places, column_class):
    (cell,) = places.study_list.find("table", id="result_list").find_all("td", class_=column_class)
    return cell.text


def judge_runs_cost(places):
    """The Cost (USD) cell of the run's row in the leaderboard's Judge runs table."""
    run = places.world.run
    (row,) = [cells for table in places.leaderboard.find_all("table")
              for cells in map(Element.cells, table.find_all("tr"))
              if cells[:2] == [f"#{run.pk}", f"{run.engine} · {run.get_mode_display()}"]]
    return row[-1]


def dashboard_cost(places):
    rows = [cells for cells in map(Element.cells, places.dashboard.find_all("tr")) if cells[:1] == [
        f"#{places.world.run.pk}"]]
    (row,) = rows
    return row[-1]


@dataclass(frozen=True)
class Figure:
    """A figure a researcher reads, and each place's reader of it."""
    name: str
    readers: dict


def elo_figures(title, board_key):
    return [Figure(f"{title}: Elo of {model}", {"leaderboard page": page_elo(board_key, model),
                                                "API": api_elo(board_key, model)})
            for model in ("human-verified reference", *MODELS)]


FIGURES = [
    *elo_figures("Crowd", crowd),
    *elo_figures("LLM judge", run_key),
    Figure("Judge's Spearman of Elo with the crowd's", {
        "leaderboard page, board": lambda p: number(_board_agreement(p), r"Spearman of rankings (-?[\d.]+)"),
        "leaderboard page, agreement table": _page_agreement_cell("Spearman of rankings"),
        "leaderboard page, judge report": lambda p: number(_report_cell(p, "spearman")[0]),
        "API, agreement": api_agreement("spearman"),
        "API, judge report": lambda p: p.api[run_key(p)]["judge_report"]["spearman"]["rho"],
        "snapshot judge_report.json": lambda p: p.judge_report_json[run_key(p)]["spearman"]["rho"],
        "scipy over the shown Elo": scipy_over_the_shown_elo,
    }),
    Figure("Models the Spearman is over", {
        "leaderboard page, judge report": lambda p: number(_report_cell(p, "spearman")[0], r"over (\d+) models"),
        "API, judge report": lambda p: p.api[run_key(p)]["judge_report"]["spearman"]["models"],
        "snapshot judge_report.json": lambda p: p.judge_report_json[run_key(p)]["spearman"]["models"],
    }),
    Figure("Judge's agreement with the crowd majority (%)", {
        "leaderboard page, board": lambda p: number(_board_agreement(p), r"majority: ([\d.]+)%"),
        "leaderboard page, agreement table": _page_agreement_cell("Agreement with the majority"),
        "leaderboard page, judge report": lambda p: number(report_majority_all(p), r"all ([\d.]+)%"),
        "API, agreement": lambda p: 100 * p.api[run_key(p)]["agreement"]["accuracy"],
        "API, judge report": lambda p: 100 * _majority_all(p.api[run_key(p)]["judge_report"])["rate"],
        "snapshot judge_report.json": lambda p: 100 * _majority_all(p.judge_report_json[run_key(p)])["rate"],
    }),
    Figure("Its denominator: battles with a crowd majority", {
        "leaderboard page, board": lambda p: number(_board_agreement(p), r"of (\d+) battles? with a majority"),
        "leaderboard page, agreement table": _page_agreement_cell("With a crowd majority"),
        "leaderboard page, judge report": lambda p: number(report_majority_all(p), r"n=(\d+)"),
        "API, agreement": api_agreement("with_majority"),
        "API, judge report": lambda p: _majority_all(p.api[run_key(p)]["judge_report"])["n"],
        "snapshot judge_report.json": lambda p: _majority_all(p.judge_report_json[run_key(p)])["n"],
    }),
    Figure("Battles the judge shares with the crowd", {
        "leaderboard page, board": lambda p: number(_board_agreement(p), r"\((\d+) shared\)"),
        "leaderboard page, agreement table": _page_agreement_cell("Battles shared"),
        "API, agreement": api_agreement("shared"),
    }),
    Figure("Judge's Cohen's κ with the crowd", {
        "leaderboard page, board": lambda p: number(_board_agreement(p), r"Cohen's κ (-?[\d.]+)"),
        "leaderboard page, agreement table": _page_agreement_cell("Cohen's κ"),
        "API, agreement": api_agreement("kappa"),
    }),
    Figure("Crowd's Krippendorff's α", {
        "leaderboard page": lambda p: number(p.leaderboard.find("p", class_="crowd-alpha").text, r"α (-?[\d.]+)"),
        "API": lambda p: p.api[HUMAN]["alpha"]["alpha"],
    }),
    Figure("Human judgements", {
        "leaderboard page": lambda p: number(p.leaderboard.find("section", id="board-human").find(
            "p", class_="counts").text, r"(\d+) judgements"),
        "API": lambda p: p.api[HUMAN]["judgements"],
        "leaderboard page, judge report": lambda p: number(
            p.leaderboard.find("tr", **{"data-measure": "verdicts"}).find("td").text),
        "dashboard": lambda p: number(p.dashboard.find("tbody").find("tr").cells()[3], r"(\d+) /"),
        "family workflow": lambda p: number(_workflow_step(p, "human_judgements"), r"(\d+) of"),
        "snapshot manifest": lambda p: p.manifest["rows"]["human_preferences"],
    }),
    Figure("Battles", {
        "leaderboard page": lambda p: number(p.leaderboard.find("section", id="board-human").find(
            "p", class_="counts").text, r"(\d+) battles"),
        "API": lambda p: p.api[HUMAN]["battles"],
        "dashboard": lambda p: number(p.dashboard.find("tbody").find("tr").cells()[2]),
        "family workflow": lambda p: number(_workflow_step(p, "battles"), r"(\d+) battles"),
    }),
    Figure("Judge's verdicts", {
        "leaderboard page": lambda p: number(p.leaderboard.find("section", id=f"board-{run_key(p)}").find(
            "p", class_="counts").text, r"(\d+) judgements"),
        "leaderboard page, judge report": lambda p: number(_report_cell(p, "verdicts")[0]),
        "API": lambda p: p.api[run_key(p)]["judgements"],
        "snapshot judge_report.json": lambda p: p.judge_report_json[run_key(p)]["judgements"],
    }),
    Figure("Table 2: GPT-4 correct (%)", {
        "admin Table 2": table2_page("GPT-4 Correct (%)"),
        "snapshot manifest": lambda p: p.manifest["table2"]["overall"]["correct_pct"],
        "progress.table2": lambda p: table2().overall.correct_pct,
    }),
    Figure("Table 2: references rated", {
        "admin Table 2": table2_page("References rated (n)"),
        "snapshot manifest": lambda p: p.manifest["table2"]["overall"]["references"],
        "progress.table2": lambda p: table2().overall.references,
    }),
    Figure("Table 2: yield (%)", {
        "admin Table 2": table2_page("Yield (%)"),
        "snapshot manifest": lambda p: p.manifest["table2"]["overall"]["yield_pct"],
        "progress.table2": lambda p: table2().overall.yield_pct,
    }),
    Figure("Instances in the benchmark", {
        "family workflow, verification": lambda p: number(_workflow_step(p, "verification"),
                                                          r"\((\d+) in the benchmark\)"),
        "family workflow, snapshot": lambda p: number(_workflow_step(p, "snapshot"), r"holds (\d+) of"),
        "snapshot manifest rows": lambda p: p.manifest["rows"]["visit_bench_single_image"],
        "snapshot sheet": lambda p: len(list(csv.DictReader(io.StringIO(p.snapshot_file(
            "visit_bench_single_image.csv"))))),
        "benchmark_instances": lambda p: benchmark_instances().count(),
    }),
    Figure("Study's submissions", {
        "study page": lambda p: number(_study_figures_field(p), r"(\d+) submissions?"),
        "study list": lambda p: number(study_list_cell(p, "field-submission_count")),
        "study.completed event": lambda p: p.study_completed["submissions"],
        "study.completed event, summary": lambda p: number(p.study_completed["summary"], r"(\d+) submissions?"),
    }),
    Figure("Study's committed spend (USD)", {
        "study page": lambda p: number(_study_figures_field(p), r"\$([\d.]+) committed"),
        "study list": lambda p: number(study_list_cell(p, "field-spend"), r"\$([\d.]+)"),
        "study.completed event": lambda p: Decimal(p.study_completed["committed_usd"]),
    }),
    Figure("Judge run's cost", {
        "dashboard": dashboard_cost,
        "leaderboard page, judge runs": judge_runs_cost,
        "leaderboard page, judge report": lambda p: _report_cell(p, "cost")[0],
        "API, judge report": lambda p: dollars(p.api[run_key(p)]["judge_report"]["cost_usd"],
                                               unpriced=p.api[run_key(p)]["judge_report"]["unpriced_calls"]),
        "snapshot judge_report.json": lambda p: dollars(p.judge_report_json[run_key(p)]["cost_usd"],
                                                        unpriced=p.judge_report_json[run_key(p)]["unpriced_calls"]),
        "the run": lambda p: p.world.run.cost_text,
    }),
]


# --- the test ------------------------------------------------------------------------------------


def _as_shown(reading, places):
    """A reading as a page would show it with `places` decimal places: a page's text is kept as it
    reads, a number from the API, a file or the domain is written to the same places."""
    if isinstance(reading, str):
        return reading
    if places is None or isinstance(reading, int):
        return Decimal(reading)
    return Decimal(f"{reading:.{places}f}")


def readings_of(figure, places):
    readings = {place: read(places) for place, read in figure.readers.items()}
    shown = [-reading.as_tuple().exponent for reading in readings.values() if isinstance(reading, Decimal)]
    decimals = min(shown) if shown else None
    return {place: _as_shown(reading, decimals) for place, reading in readings.items()}


@pytest.fixture
def world(judge_server, prolific, snapshot_folder, settings):
    # The study.completed event is read as the researchers' e-mail carries it.
    settings.NOTIFY_EMAILS = ["lead@example.org"]
    return build_world(judge_server)


@pytest.mark.django_db
def test_every_figure_reads_the_same_in_every_place_it_appears(world):
    places = Places(world)
    disagreements = {}
    for figure in FIGURES:
        assert len(figure.readers) >= 2, f"{figure.name}: a figure read in one place cannot disagree"
        readings = readings_of(figure, places)
        if len(set(readings.values())) != 1:
            disagreements[figure.name] = readings
    assert not disagreements, json.dumps(disagreements, indent=2, default=str)


# --- in Chromium ---------------------------------------------------------------------------------


def _shoot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"figures-{name}.png"), full_page=True)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_researcher_reads_the_leaderboard_the_study_and_a_worker_in_chromium(world, browser, live_server):
    """The pages these figures are read from, as a researcher's Chromium draws them: every plot
    loads, nothing fails, and the screenshots (test-artifacts/screenshots/figures-*.png) are there
    to be looked at."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("response", lambda response: errors.append(f"{response.status} {response.url}")
            if response.status >= 400 and not response.url.endswith("/favicon.ico") else None)
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/admin/")

    page.goto(live_server.url + reverse("dashboard:leaderboard", args=[world.tournament.pk]))
    page.wait_for_function("() => [...document.querySelectorAll('img.plot')].every(i => i.complete)")
    assert page.locator("img.plot").evaluate_all("images => images.every(i => i.naturalWidth > 0)")
    _shoot(page, "leaderboard")
    page.locator("table.judge-report").screenshot(path=str(SCREENSHOTS / "figures-judge-report.png"))

    page.goto(live_server.url + reverse("admin:mturk_crowdstudy_change", args=[world.study.pk]))
    _shoot(page, "study")

    participant = Worker.objects.get(platform=Worker.Platform.PROLIFIC, external_id="P2")
    page.goto(f"{live_server.url}/admin/annotation/worker/{participant.pk}/page/")
    _shoot(page, "worker")
    assert errors == []
    context.close()
