"""Endpoint models in the admin: named on the tournament's form, their answers generated from the
workflow page before the battles are sampled, and a missing key said plainly there."""

import re

import pytest
from django.urls import reverse

from annotation.models import ModelEndpoint, Tournament
from annotation.preferences.answers import generate_answers
from tasks.jobs import job_key
from tasks.models import Job as JobRecord
from tests.annotation.admin.test_admin_workflow import next_button, next_url, tournament_form, workflow_url
from tests.openai_fake import completion
from tests.scoring_factories import verified_instance, with_responses

pytestmark = pytest.mark.django_db

KEY_ENV = "CROWDBENCH_TEST_ENDPOINT_KEY"


def endpoint_fields(base_url, **fields):
    data = {"endpoint_models-TOTAL_FORMS": "1", "endpoint_models-0-model_name": "llava-next",
            "endpoint_models-0-base_url": base_url, "endpoint_models-0-model": "llava-v1.6",
            "endpoint_models-0-api_key_env": KEY_ENV, "endpoint_models-0-parameters": '{"temperature": 0.2}',
            "endpoint_models-0-input_price_per_million": "2.5", "endpoint_models-0-output_price_per_million": "10",
            "endpoint_models-0-concurrency": "2"}
    data.update({f"endpoint_models-0-{name}": value for name, value in fields.items()})
    return data


def steps(page):
    return re.findall(r'data-step="([^"]+)"', page)


def test_a_tournament_names_an_endpoint_model_and_waits_for_its_answers_before_battles(
        admin_client, openai_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "endpoint-key")
    with_responses(verified_instance(), "otter")
    response = admin_client.post(reverse("admin:annotation_tournament_add"),
                                 tournament_form(**endpoint_fields(openai_server.base_url)), follow=True)
    tournament = Tournament.objects.get()
    endpoint = tournament.endpoint_models.get()
    assert (endpoint.model, endpoint.api_key_env, endpoint.parameters) == ("llava-v1.6", KEY_ENV, {"temperature": 0.2})
    page = response.content.decode()
    assert not tournament.battles.exists()
    assert "Generate the endpoint models&#x27; answers first: llava-next has 1 of 1 still to answer" in page
    assert next_button(page) == ("generate_answers", "Generate answers")
    assert steps(page).index("answers") < steps(page).index("battles")

    openai_server.default = completion("A red bicycle.")
    generate_answers(tournament=tournament)
    page = admin_client.get(workflow_url(tournament)).content.decode()
    assert "llava-next: 1 of 1" in page
    assert next_button(page) == ("sample_battles", "Sample battles")


def test_an_api_key_instead_of_its_variable_name_is_refused_on_the_form(admin_client, openai_server):
    response = admin_client.post(reverse("admin:annotation_tournament_add"), tournament_form(
        **endpoint_fields(openai_server.base_url, api_key_env="sk-proj-abc123", parameters='{"n": 3}')))
    page = response.content.decode()
    assert response.status_code == 200
    assert "Give the NAME of an environment variable" in page
    assert "“n” is not a generation parameter" in page
    assert not ModelEndpoint.objects.exists()


def test_a_missing_key_variable_is_a_clear_error_on_the_workflow_page(admin_client, openai_server, monkeypatch,
                                                                      django_capture_on_commit_callbacks):
    monkeypatch.delenv(KEY_ENV, raising=False)
    verified_instance()
    tournament = Tournament.objects.create(name="keyless")
    ModelEndpoint.objects.create(tournament=tournament, model_name="llava-next", base_url=openai_server.base_url,
                                 model="llava-v1.6", api_key_env=KEY_ENV)
    page = admin_client.get(workflow_url(tournament)).content.decode()
    assert f"the environment variable {KEY_ENV} that should hold the key" in page

    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_client.post(next_url(tournament), {"action": "generate_answers"}, follow=True)
    assert response.status_code == 200
    assert callbacks == [] and openai_server.requests == []
    messages = [str(m) for m in response.context["messages"]]
    assert any(f"{KEY_ENV} that should hold the key" in m for m in messages)


def test_generate_answers_on_the_workflow_queues_the_job(admin_client, openai_server, monkeypatch,
                                                         django_capture_on_commit_callbacks):
    monkeypatch.setenv(KEY_ENV, "endpoint-key")
    verified_instance()
    tournament = Tournament.objects.create(name="queued")
    ModelEndpoint.objects.create(tournament=tournament, model_name="llava-next", base_url=openai_server.base_url,
                                 model="llava-v1.6", api_key_env=KEY_ENV)
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_client.post(next_url(tournament), {"action": "generate_answers"}, follow=True)
    assert len(callbacks) == 1
    assert "Answers from 1 endpoint model are being generated" in response.content.decode()


def test_a_generation_whose_retries_ran_out_offers_generate_answers_again_with_the_reason(
        admin_client, openai_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "endpoint-key")
    instance = verified_instance()
    tournament = Tournament.objects.create(name="gave up")
    endpoint = ModelEndpoint.objects.create(tournament=tournament, model_name="llava-next",
                                            base_url=openai_server.base_url, model="llava-v1.6", api_key_env=KEY_ENV)
    endpoint.calls.create(instance=instance, error="429 from the server: rate limited; retried later.")
    JobRecord.objects.create(key=job_key("tasks.answer_chunk", [endpoint.pk, 0, 39]), task="tasks.answer_chunk",
                             args=[endpoint.pk, 0, 39], status=JobRecord.Status.RUNNING)
    page = admin_client.get(workflow_url(tournament)).content.decode()
    assert next_button(page) is None and "are being generated" in page

    reason = "RateLimitError: Rate limit reached for llava-v1.6."
    JobRecord.objects.update(status=JobRecord.Status.FAILED, error=reason)
    ModelEndpoint.objects.update(error=reason)
    page = admin_client.get(workflow_url(tournament)).content.decode()
    assert next_button(page) == ("generate_answers", "Generate answers")
    assert reason in page


def test_the_calls_list_shows_each_calls_outcome_in_a_bounded_number_of_queries(
        admin_client, openai_server, django_assert_max_num_queries):
    tournament = Tournament.objects.create(name="calls")
    endpoint = ModelEndpoint.objects.create(tournament=tournament, model_name="llava-next",
                                            base_url=openai_server.base_url, model="llava-v1.6", api_key_env=KEY_ENV)
    for n in range(5):
        endpoint.calls.create(instance=verified_instance(), status="failed", error=f"400 from the server: bad {n}.")
    with django_assert_max_num_queries(12):
        page = admin_client.get(reverse("admin:annotation_endpointcall_changelist")).content.decode()
    assert all(f"bad {n}." in page for n in range(5))
