"""Answers from endpoints: a tournament's endpoint models asked for their answers through the real
openai client against the loopback OpenAI-compatible server, which checks the request bodies."""

import base64
import io
from decimal import Decimal

import openai
import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from PIL import Image

from annotation.collection.uploads import store_uploaded_image
from annotation.exceptions import AnnotationError
from annotation.models import EndpointCall, InstanceImage, ModelEndpoint, ModelResponse, Tournament
from annotation.preferences.answers import generate_answers, start_generation
from annotation.preferences.tournaments import sample_battles
from tests.factories import FamilyFactory, WorkerFactory
from tests.openai_fake import ScriptedResponse, completion, rate_limited, server_error
from tests.scoring_factories import verified_instance, with_responses

pytestmark = pytest.mark.django_db

KEY_ENV = "CROWDBENCH_TEST_ENDPOINT_KEY"
PARAMETERS = {"temperature": 0.2, "max_tokens": 300, "top_p": 0.9}


@pytest.fixture
def endpoint_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "endpoint-key")


def endpoint_tournament(server, *, families=(), **fields):
    tournament = Tournament.objects.create(name="endpoints", include_reference=False)
    tournament.families.set(families)
    endpoint = ModelEndpoint.objects.create(
        tournament=tournament, model_name="llava-next", base_url=server.base_url, model="llava-v1.6",
        api_key_env=KEY_ENV, parameters=PARAMETERS, input_price_per_million=Decimal("2.5"),
        output_price_per_million=Decimal("10"), **fields)
    return tournament, endpoint


def test_request_carries_the_instruction_every_image_and_the_generation_parameters(openai_server, endpoint_key):
    family = FamilyFactory(is_multi_image=True)
    instance = verified_instance(family=family, image_count=3, instruction="Which of these is oldest?")
    tournament, _ = endpoint_tournament(openai_server, families=[family])
    openai_server.default = completion("The first.")

    generate_answers(tournament=tournament)

    (request,) = openai_server.requests
    (message,) = request.body["messages"]
    parts = message["content"]
    assert [p["image_url"]["url"] for p in parts if p["type"] == "image_url"] == [
        image.url for image in instance.ordered_images()]
    assert len([p for p in parts if p["type"] == "image_url"]) == 3
    assert parts[-1] == {"type": "text", "text": "Which of these is oldest?"}
    assert request.body["model"] == "llava-v1.6"
    assert {name: request.body[name] for name in PARAMETERS} == PARAMETERS
    assert request.headers["authorization"] == "Bearer endpoint-key"
    assert request.headers["idempotency-key"] == EndpointCall.objects.get().idempotency_key


def test_stored_answer_carries_its_parameters_tokens_cost_and_endpoint(openai_server, endpoint_key):
    instance = verified_instance()
    tournament, endpoint = endpoint_tournament(openai_server)
    openai_server.default = completion("A red bicycle.", prompt_tokens=1000, completion_tokens=200)

    assert generate_answers(tournament=tournament) == 1

    response = ModelResponse.objects.get(instance=instance, model_name="llava-next")
    assert response.text == "A red bicycle."
    assert response.parameters == PARAMETERS
    assert (response.prompt_tokens, response.completion_tokens) == (1000, 200)
    # 1000 * 2.5 + 200 * 10 USD per million tokens.
    assert response.cost_usd == Decimal("0.004500")
    assert response.imported_from == f"endpoint: llava-v1.6 at {openai_server.base_url}"
    call = EndpointCall.objects.get()
    assert (call.status, call.attempts, call.cost_usd) == (EndpointCall.Status.ANSWERED, 1, Decimal("0.0045"))


def test_a_second_run_asks_nothing_again(openai_server, endpoint_key):
    verified_instance()
    verified_instance()
    tournament, _ = endpoint_tournament(openai_server)
    openai_server.default = completion("An answer.")
    assert generate_answers(tournament=tournament) == 2

    assert generate_answers(tournament=tournament) == 0

    assert len(openai_server.requests) == 2
    assert ModelResponse.objects.filter(model_name="llava-next").count() == 2


def test_an_instance_with_a_response_of_that_name_is_not_asked(openai_server, endpoint_key):
    answered = verified_instance()
    with_responses(answered, "llava-next")
    owed = verified_instance(instruction="What is on the table?")
    tournament, _ = endpoint_tournament(openai_server)
    openai_server.default = completion("A cup.")

    generate_answers(tournament=tournament)

    (request,) = openai_server.requests
    assert request.body["messages"][0]["content"][-1]["text"] == owed.instruction


def test_a_missing_key_variable_is_refused_with_its_name_before_any_request(openai_server, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    verified_instance()
    tournament, _ = endpoint_tournament(openai_server)

    with pytest.raises(AnnotationError, match=f"{KEY_ENV} that should hold the key"):
        start_generation(tournament=tournament)
    assert openai_server.requests == []


def test_an_endpoint_model_on_an_internal_address_is_refused_and_never_asked(openai_server, endpoint_key, settings):
    settings.ENDPOINT_MODEL_ALLOWED_NETWORKS = []
    verified_instance()
    tournament, endpoint = endpoint_tournament(openai_server)

    with pytest.raises(AnnotationError, match="1 of 1 call"):
        generate_answers(tournament=tournament)

    assert openai_server.requests == []
    call = EndpointCall.objects.get(endpoint=endpoint)
    assert call.status == EndpointCall.Status.FAILED
    assert call.error.startswith("Refused: 127.0.0.1 is a loopback address")
    assert "ENDPOINT_MODEL_ALLOWED_NETWORKS" in call.error


def test_a_refused_key_is_recorded_on_the_call_and_not_retried(openai_server, endpoint_key):
    verified_instance()
    tournament, endpoint = endpoint_tournament(openai_server)
    openai_server.script(ScriptedResponse(401, {"error": {
        "message": "Incorrect API key provided.", "type": "invalid_request_error", "param": None,
        "code": "invalid_api_key"}}))

    with pytest.raises(AnnotationError, match="401 from"):
        generate_answers(tournament=tournament)

    call = EndpointCall.objects.get()
    assert call.status == EndpointCall.Status.FAILED
    assert f"the key in {KEY_ENV} was refused (Incorrect API key provided.)" in call.error
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(("failure", "raised", "said"), [
    (rate_limited, openai.RateLimitError, "429 from"),
    (server_error, openai.InternalServerError, "500 from"),
])
def test_rate_limits_and_outages_past_the_clients_retries_leave_the_call_owed_with_the_reason(
        openai_server, endpoint_key, settings, failure, raised, said):
    settings.OPENAI_MAX_RETRIES = 1
    verified_instance()
    tournament, _ = endpoint_tournament(openai_server)
    openai_server.script(failure(), failure())

    # Raised for the job, which retries it with backoff (tasks/jobs.py TRANSIENT_ERRORS).
    with pytest.raises(raised):
        generate_answers(tournament=tournament)
    call = EndpointCall.objects.get()
    assert call.status == EndpointCall.Status.PENDING and call.error.startswith(said)

    openai_server.default = completion("Now it answers.")
    generate_answers(tournament=tournament)
    call.refresh_from_db()
    assert (call.status, call.attempts) == (EndpointCall.Status.ANSWERED, 2)
    # Both attempts were the same request: one identity for one answer.
    keys = {request.headers["idempotency-key"] for request in openai_server.requests}
    assert keys == {call.idempotency_key} and len(openai_server.requests) == 3


def test_a_response_without_an_answer_is_a_failure_with_a_clear_message(openai_server, endpoint_key):
    verified_instance()
    tournament, _ = endpoint_tournament(openai_server)
    openai_server.script(completion(""))

    with pytest.raises(AnnotationError, match="answer was empty"):
        generate_answers(tournament=tournament)
    assert not ModelResponse.objects.filter(model_name="llava-next").exists()
    assert EndpointCall.objects.get().status == EndpointCall.Status.FAILED


def test_battles_wait_for_the_endpoint_models_answers(openai_server, endpoint_key):
    instance = verified_instance()
    with_responses(instance, "otter")
    tournament, _ = endpoint_tournament(openai_server)

    with pytest.raises(AnnotationError, match="llava-next has 1 of 1 still to answer"):
        sample_battles(tournament=tournament)

    openai_server.default = completion("An answer.")
    generate_answers(tournament=tournament)
    assert sample_battles(tournament=tournament) == 1
    with pytest.raises(AnnotationError, match="already has its battles"):
        start_generation(tournament=tournament)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("base_url", "ftp://models.example.org/v1", "http(s) URL"),
    ("base_url", "https://user:secret@models.example.org/v1", "must not hold credentials"),
    ("base_url", "http://169.254.169.254/v1", "points inside our network"),
    ("base_url", "http://[::1]:8000/v1", "points inside our network"),
    ("api_key_env", "sk-live-1234", "NAME of an environment variable"),
    ("parameters", {"temprature": 0.2}, "“temprature” is not a generation parameter"),
    ("parameters", {"temperature": "hot"}, "“temperature” must be a number from 0 to 2"),
    ("parameters", {"max_tokens": 0}, "“max_tokens” must be a whole number of at least 1"),
    ("parameters", [0.2], "must be a JSON object"),
])
def test_an_endpoint_is_validated_before_it_is_saved(field, value, message):
    tournament = Tournament.objects.create(name="checked")
    endpoint = ModelEndpoint(tournament=tournament, model_name="m", base_url="https://models.example.org/v1",
                             model="m", api_key_env="MODEL_KEY", parameters={})
    setattr(endpoint, field, value)
    with pytest.raises(ValidationError) as caught:
        endpoint.full_clean()
    assert message in str(caught.value.message_dict[field])


def test_manage_py_generate_answers_asks_and_reports_each_model(openai_server, endpoint_key):
    verified_instance()
    tournament, _ = endpoint_tournament(openai_server)
    openai_server.default = completion("An answer.", prompt_tokens=1000, completion_tokens=100)
    out = io.StringIO()

    call_command("generate_answers", tournament.name, stdout=out)

    assert "1 answer(s) stored." in out.getvalue()
    assert "llava-next: 1 of 1 answered, 0 failed, $0.0035" in out.getvalue()


def test_an_uploaded_image_travels_as_a_data_url(openai_server, endpoint_key, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buffer, format="PNG")
    image = store_uploaded_image(upload=SimpleUploadedFile("photo.png", buffer.getvalue(), content_type="image/png"),
                                 uploaded_by=WorkerFactory(), licence="CC0 1.0")
    instance = verified_instance()
    InstanceImage.objects.filter(instance=instance).update(image=image)
    tournament, _ = endpoint_tournament(openai_server)
    openai_server.default = completion("Red.")

    generate_answers(tournament=tournament)

    (part,) = [p for p in openai_server.requests[0].body["messages"][0]["content"] if p["type"] == "image_url"]
    assert part["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
