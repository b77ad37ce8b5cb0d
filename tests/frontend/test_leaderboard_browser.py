"""The leaderboard as a researcher reads it, in headless Chromium: Elo beside Bradley-Terry, the
all-images rows, the warning on thin data, the judge's agreement, and figures that load.

The screenshot lands in docs/screenshots/leaderboard.png (the README and the docs site show it).
"""

import os
import random

import pytest
from django.contrib.auth import get_user_model

from annotation.crowdwork.queue import next_assignment
from annotation.judging.runner import create_judge_run, run_judge
from annotation.models import HumanJudgement, JudgeRun, Stage
from annotation.preferences.judgements import battle_of, shown_left_for, submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring import MIN_MATCHES
from annotation.scoring.freshness import refresh_leaderboard
from tests.factories import FamilyFactory, WorkerFactory
from tests.openai_fake import completion
from tests.paths import DOCS_SCREENSHOTS
from tests.scoring_factories import create_tournament, rubric_tournament, verified_instance, with_responses

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOT = DOCS_SCREENSHOTS / "leaderboard.png"
# How often a worker prefers each model in a battle, so the ranking has a shape to read.
STRENGTH = {"human-verified reference": 0.8, "llava-1.5": 0.6, "instructblip": 0.45, "otter": 0.3}


def pilot_tournament(judge_server):
    families = [FamilyFactory(name="Contextual knowledge of events"), FamilyFactory(name="Art knowledge"),
                FamilyFactory(name="Spot the difference", is_multi_image=True)]
    for family, count in zip(families, (3, 2, 2), strict=True):
        for _ in range(count):
            with_responses(verified_instance(family=family), "llava-1.5", "instructblip", "otter")
    tournament = create_tournament(name="VisIT-Bench pilot", judgements_per_pair=3)
    launch_tournament(tournament=tournament)
    chance = random.Random(7)
    for _ in range(3):
        worker = WorkerFactory()
        while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
            battle = battle_of(assignment.unit)
            a, b = battle.response_a.model_name, battle.response_b.model_name
            prefers_a = chance.random() < STRENGTH[a] / (STRENGTH[a] + STRENGTH[b])
            # The worker clicks a side; the server drew which side shows A.
            a_on_left = shown_left_for(assignment=assignment, tournament=tournament) == HumanJudgement.ShownLeft.A
            choice = "left" if prefers_a == a_on_left else "right"
            submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice=choice)
    judge_server.default = completion("Both are plausible.\nOverall, Response A is better.")
    run_judge(run=create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE))
    # The background job's work, as a worker would do it once the judge run finished.
    refresh_leaderboard(tournament=tournament)
    return tournament




def test_researcher_reads_the_leaderboard_with_bradley_terry_all_images_and_warnings(
    browser, live_server, judge_server
):
    tournament = pilot_tournament(judge_server)
    get_user_model().objects.create_superuser("lead", password="a long password")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    page.goto(f"{live_server.url}/admin/login/?next=/dashboard/")
    page.fill("#id_username", "lead")
    page.fill("#id_password", "a long password")
    page.click("input[type=submit]")
    page.click(f"text={tournament.name} >> xpath=ancestor::tr >> text=Leaderboard")
    page.wait_for_selector("table.leaderboard", timeout=180_000)

    human = page.locator("#board-human")
    headers = human.locator("table.leaderboard thead th").all_inner_texts()
    assert headers[2:6] == ["Elo", "95% interval", "Bradley-Terry", "95% interval"]
    assert human.locator("p.counts").inner_text().startswith("42 battles, 126 judgements")
    splits = human.locator("table.leaderboard tbody tr td:first-child").all_inner_texts()
    assert splits.count("All images") == 4 and "Single Image" in splits and "Multiple Images" in splits
    bt_cells = human.locator("tr.all-images td:nth-child(5)").all_inner_texts()
    assert all(cell.strip().isdigit() for cell in bt_cells)
    assert "Gaussian prior centred on 1000" in human.locator("p.prior").inner_text()
    assert human.locator("p.warning").inner_text().startswith(f"⚠ Fewer than {MIN_MATCHES} matches")
    assert human.locator("tr.few").count() > 0

    judge = page.locator("section.board").nth(1)
    assert "Agreement with the crowd majority:" in judge.locator("p.agreement").inner_text()
    assert page.locator("table.agreement tbody tr").count() == 1

    images = page.locator("img.plot")
    # Elo/BT and categories for two boards, agreement for the judge, the judge report's length plot
    assert images.count() == 6
    # An evaluator per column: the crowd, then the judge.
    assert page.locator("table.judge-report thead th.evaluator").all_inner_texts()[0].startswith("Human judgements")
    assert page.locator("table.judge-report thead th.evaluator").count() == 2
    for index in range(images.count()):
        images.nth(index).scroll_into_view_if_needed()
        page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=images.nth(index).element_handle(),
                               timeout=60_000)
    assert not errors
    page.evaluate("window.scrollTo(0, 0)")
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    # The title, the crowd's board with its figures, and the start of the judge's board.
    bottom = judge.bounding_box()["y"] + 160
    page.screenshot(path=str(SCREENSHOT), full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": bottom})


def test_researcher_reads_the_rubric_scores_beside_the_ratings(browser, live_server, tmp_path):
    tournament = rubric_tournament()
    refresh_leaderboard(tournament=tournament)
    get_user_model().objects.create_superuser("lead", password="a long password")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    page.goto(f"{live_server.url}/admin/login/?next=/dashboard/")
    page.fill("#id_username", "lead")
    page.fill("#id_password", "a long password")
    page.click("input[type=submit]")
    page.click(f"text={tournament.name} >> xpath=ancestor::tr >> text=Leaderboard")
    page.wait_for_selector("table.rubric-scores", timeout=180_000)

    human = page.locator("#board-human")
    table = human.locator("table.rubric-scores")
    assert table.locator("thead th").all_inner_texts() == [
        "Rubric", "Model", "Mean score", "95% interval", "Responses", "Scores", "Elo"]
    overall = [row.split("\t") for row in table.locator("tr.all-rubrics").all_inner_texts()]
    assert [(cells[1], cells[2], cells[4], cells[5]) for cells in overall] == [
        ("llava", "4.67", "3", "18"), ("instructblip", "4.00", "3", "18"), ("otter", "2.00", "3", "18"),
        ("blip2", "1.00", "3", "18")]
    assert all(cells[6].strip().isdigit() for cells in overall)
    criteria = set(table.locator("tbody tr:not(.all-rubrics) td:first-child").all_inner_texts())
    assert criteria == {"Is the response grounded in the image?", "Does the response follow the instruction?"}
    assert human.locator("p.rubric-correlation").inner_text() == (
        "Spearman's ρ between the models' mean rubric score and their Elo (All images): "
        "1.00 over 4 models.")
    assert not errors
    screenshot = tmp_path / "leaderboard-rubric.png"
    # Boxes are measured from the top of the page, as the full-page clip is.
    page.evaluate("window.scrollTo(0, 0)")
    top = human.locator("h3").bounding_box()["y"] - 20
    bottom = human.locator("p.rubric-correlation").bounding_box()
    page.screenshot(path=str(screenshot), full_page=True,
                    clip={"x": 0, "y": top, "width": 1280, "height": bottom["y"] + bottom["height"] + 20 - top})
    assert screenshot.stat().st_size > 10_000
    print(f"Rubric table screenshot: {screenshot}")
