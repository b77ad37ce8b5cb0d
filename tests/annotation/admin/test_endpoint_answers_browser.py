"""A researcher names a vision model by its endpoint on the tournament's form, in headless Chromium,
and a real worker asks it for the answers the battles will compare: the workflow page shows the
answers coming and then offers the battles."""

import os

import pytest
from django.contrib.auth import get_user_model

from annotation.models import InstanceImage, ModelResponse, Tournament
from tests.openai_fake import completion
from tests.paths import DOCS_SCREENSHOTS
from tests.scoring_factories import verified_instance, with_responses

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

KEY_ENV = "CROWDBENCH_TEST_ENDPOINT_KEY"
PASSWORD = "a-long-test-password"


def test_a_researcher_adds_an_endpoint_model_and_generates_its_answers_before_the_battles(
        browser, live_server, start_worker, openai_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "endpoint-key")
    instances = [verified_instance(instruction=f"What is unusual in picture {n}?") for n in range(3)]
    for instance in instances:
        with_responses(instance, "otter")
    openai_server.default = completion("A cat asleep on a keyboard.", prompt_tokens=900, completion_tokens=12)
    start_worker(**{KEY_ENV: "endpoint-key"})
    get_user_model().objects.create_superuser("researcher", "researcher@example.org", PASSWORD)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    page.goto(f"{live_server.url}/admin/annotation/tournament/add/")
    page.locator("#id_name").fill("Otter against an endpoint model")
    if not page.locator('input[name="endpoint_models-0-model_name"]').count():
        page.get_by_text("Add another endpoint model").click()
    page.locator('input[name="endpoint_models-0-model_name"]').fill("llava-next")
    page.locator('input[name="endpoint_models-0-base_url"]').fill(openai_server.base_url)
    page.locator('input[name="endpoint_models-0-model"]').fill("llava-v1.6")
    page.locator('input[name="endpoint_models-0-api_key_env"]').fill(KEY_ENV)
    page.locator('[name="endpoint_models-0-parameters"]').fill('{"temperature": 0, "max_tokens": 200}')
    page.locator('input[name="endpoint_models-0-input_price_per_million"]').fill("2.5")
    page.locator('input[name="endpoint_models-0-output_price_per_million"]').fill("10")
    page.get_by_role("button", name="Save", exact=True).click()

    tournament = Tournament.objects.get()
    page.wait_for_url(f"{live_server.url}/admin/annotation/tournament/{tournament.pk}/workflow/")
    assert "llava-next has 3 of 3 still to answer" in page.content()
    page.get_by_role("button", name="Generate answers").click()
    # The workflow page refreshes its job progress by itself.
    page.get_by_role("button", name="Sample battles").wait_for(timeout=60_000)
    # 3 x (900 tokens in at $2.50 and 12 out at $10 per million)
    assert "llava-next: 3 of 3, $0.0071" in page.locator('[data-step="answers"]').inner_text()
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS_SCREENSHOTS / "endpoint-answers.png"), full_page=True)

    answers = ModelResponse.objects.filter(model_name="llava-next")
    assert sorted(answers.values_list("instance_id", flat=True)) == sorted(i.pk for i in instances)
    assert {answer.text for answer in answers} == {"A cat asleep on a keyboard."}
    for request in openai_server.requests:
        parts = request.body["messages"][0]["content"]
        images = [part for part in parts if part["type"] == "image_url"]
        instance = next(i for i in instances if i.instruction == parts[-1]["text"])
        assert len(images) == InstanceImage.objects.filter(instance=instance).count() >= 1
        assert (request.body["model"], request.body["temperature"], request.body["max_tokens"]) == (
            "llava-v1.6", 0, 200)
    assert len(openai_server.requests) == 3

    page.get_by_role("button", name="Sample battles").click()
    page.get_by_text("battles").first.wait_for()
    # All pairs of otter, llava-next and the verified reference, on each of the three instances.
    assert Tournament.objects.get().battles.count() == 9
    assert errors == []
