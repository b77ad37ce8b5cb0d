"""The researcher's admin in headless Chromium: a family made on its own form, seed image uploaded
there, its workflow page, and the next-action button; a tournament's job progress that refreshes itself.

Screenshots of the pages land in docs/screenshots/ (the README and the docs site show them).
"""

import os

import pytest

from annotation.judging.runner import create_judge_run
from annotation.models import InstructionFamily, JudgeRun, SeedImage, Stage, StageConfig
from annotation.preferences.tournaments import launch_tournament
from fixtures.images import IMAGES
from fixtures.loader import skimage_data_dir
from tests.paths import DOCS_SCREENSHOTS
from tests.scoring_factories import create_tournament, verified_instance, with_responses

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = DOCS_SCREENSHOTS




def test_a_family_made_on_its_form_with_an_uploaded_seed_image_shows_its_steps_and_next_action(
        researcher_page, live_server):
    page = researcher_page
    assert page.get_by_role("link", name="Dashboard").first.get_attribute("href") == "/dashboard/"
    page.get_by_role("link", name="Add an instruction family").click()
    page.get_by_label("Name:").fill("Contextual knowledge of events")
    page.get_by_label("Skill tags:").fill("recognition, world knowledge")
    page.get_by_label("Target instances:").fill("3")
    page.get_by_label("Seed instruction:").fill("Why is the cat sitting so still? What might it be watching?")
    page.get_by_label("Seed response:").fill("It is probably watching a bird or an insect outside the frame.")
    photo = IMAGES["chelsea"]
    page.locator('input[name="seedimage_set-0-upload"]').set_input_files(str(skimage_data_dir() / photo.filename))
    page.locator('input[name="seedimage_set-0-licence"]').fill(photo.licence)
    page.locator('input[name="seedimage_set-0-author"]').fill(photo.author)
    page.get_by_role("button", name="Save", exact=True).click()

    family = InstructionFamily.objects.get()
    page.wait_for_url(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/workflow/")
    assert family.skill_tags == ["recognition", "world knowledge"]
    assert SeedImage.objects.get(family=family).image.original_name == photo.filename
    steps = page.locator(".workflow-step strong").all_inner_texts()
    assert steps[:5] == ["Instruction generation", "Instruction-conditioned captions", "Candidate references",
                         "Verification", "Model predictions"]
    assert steps[-1] == "Snapshot"
    assert "0 of 3 instances written; not launched" in page.locator('[data-step="instruction_generation"]').inner_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "family-workflow.png"), full_page=True)

    page.get_by_role("button", name="Launch instruction generation").click()
    page.get_by_text("Instruction generation launched").wait_for()
    assert StageConfig.objects.get(family=family, stage=Stage.INSTRUCTION_GENERATION).launched_at
    assert page.get_by_role("button", name="Launch captions").is_visible()

    page.get_by_role("link", name="Edit settings").click()
    thumbnail = page.locator("img.admin-thumbnail").first
    assert thumbnail.get_attribute("alt").startswith(photo.filename)
    assert thumbnail.evaluate("img => img.naturalWidth") > 0
    page.screenshot(path=str(SCREENSHOTS / "family-form.png"), full_page=True)
    # Its stage settings fit the window: no scrolling sideways to reach a setting or the help on it.
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    assert page.get_by_text("Answers asked per task").first.is_visible()
    # Verification's own settings wait for a verification stage (test_stage_settings_browser.py).
    assert not page.get_by_text("how probable the verdict must be to stop asking").first.is_visible()
    assert page.errors == []


def test_a_tournaments_job_progress_refreshes_by_itself(researcher_page, live_server, judge_server):
    page = researcher_page
    with_responses(verified_instance(), "llava", "otter")
    tournament = create_tournament(name="Pairwise preference of the demo")
    launch_tournament(tournament=tournament)
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.RUNNING, total_calls=12, done_calls=3)
    page.goto(f"{live_server.url}/admin/annotation/tournament/{tournament.pk}/workflow/")
    bar = page.locator(f'[data-job="judge-run-{run.pk}"] progress')
    assert bar.evaluate("bar => bar.value") == 25
    JudgeRun.objects.filter(pk=run.pk).update(done_calls=9)
    page.wait_for_function(f"""() => document.querySelector('[data-job="judge-run-{run.pk}"] progress').value === 75""",
                           timeout=10_000)
    assert "9 of 12" in page.locator(f'[data-job="judge-run-{run.pk}"]').inner_text()
    page.screenshot(path=str(SCREENSHOTS / "tournament-workflow.png"), full_page=True)
    assert page.errors == []


def test_the_front_page_leads_each_reader_their_way(browser, live_server):
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name="Open the admin").wait_for()
    page.screenshot(path=str(SCREENSHOTS / "landing.png"))
    page.get_by_role("link", name="Start annotating").click()
    assert "/work/" in page.url
    page.close()
