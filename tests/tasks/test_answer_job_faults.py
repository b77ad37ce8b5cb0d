"""Fault runs of the answers-from-endpoints jobs: a real worker, real Redis, the real openai client
against the loopback server. Ends with exact counts; the figures are printed (-s)."""

import os
import signal
from collections import Counter

import pytest

from annotation.models import EndpointCall, ModelEndpoint, ModelResponse, Tournament
from annotation.preferences.answers import start_generation
from tests.celery_support import wait_for
from tests.openai_fake import completion
from tests.scoring_factories import verified_instance

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

KEY_ENV = "CROWDBENCH_TEST_ENDPOINT_KEY"
CONCURRENCY = 2
INSTANCES = 16


def answers_environment():
    # A chunk of 4 instances, 2 rounds of 2 calls: the kill falls between chunks and inside one.
    return {KEY_ENV: "endpoint-key", "ANSWER_CHUNK_INSTANCES": "4", "MODEL_JOB_RETRY_BACKOFF_SECONDS": "1",
            "CELERY_VISIBILITY_TIMEOUT_SECONDS": "10"}


def test_kill_9_mid_generation_resumes_without_repeating_a_paid_call(start_worker, openai_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "endpoint-key")
    openai_server.default = completion("An answer.", prompt_tokens=200, completion_tokens=40)
    openai_server.latency = 0.3
    openai_server.honour_idempotency_keys = True
    instances = [verified_instance(instruction=f"Question {n}: what is shown?") for n in range(INSTANCES)]
    tournament = Tournament.objects.create(name="answer faults", include_reference=False)
    endpoint = ModelEndpoint.objects.create(
        tournament=tournament, model_name="llava-next", base_url=openai_server.base_url, model="llava-v1.6",
        api_key_env=KEY_ENV, parameters={"temperature": 0}, concurrency=CONCURRENCY,
        input_price_per_million=1, output_price_per_million=2)
    worker = start_worker(**answers_environment())
    start_generation(tournament=tournament)
    answered = EndpointCall.objects.filter(endpoint=endpoint, status=EndpointCall.Status.ANSWERED)
    wait_for(lambda: answered.count() >= 6, what="answers", worker=worker)

    os.killpg(worker.process.pid, signal.SIGKILL)
    worker.process.wait()
    stored_before = set(answered.values_list("instance_id", flat=True))
    on_the_wire = dict(EndpointCall.objects.filter(endpoint=endpoint, status=EndpointCall.Status.SENT)
                       .values_list("instance_id", "idempotency_key"))
    requests_before = len(openai_server.requests)
    restarted = start_worker(**answers_environment())
    wait_for(lambda: answered.count() == INSTANCES, what="every answer", worker=restarted)

    asked = Counter(r.body["messages"][0]["content"][-1]["text"] for r in openai_server.requests)
    asked_after = Counter(r.body["messages"][0]["content"][-1]["text"]
                          for r in openai_server.requests[requests_before:])
    by_instruction = {i.pk: i.instruction for i in instances}
    figures = {
        "stored_before_kill": len(stored_before),
        "on_the_wire_at_kill": len(on_the_wire),
        "requests": len(openai_server.requests) + len(openai_server.replayed),
        "replayed_by_key": len(openai_server.replayed),
        "paid": len(openai_server.answers_by_idempotency_key),
        "asked_again_after_stored": sum(asked_after[by_instruction[pk]] for pk in stored_before),
    }
    print(f"\n{figures}")
    responses = ModelResponse.objects.filter(model_name="llava-next")
    assert responses.count() == INSTANCES
    assert figures["asked_again_after_stored"] == 0
    # Every answer paid once: a call on the wire at the kill was sent again under its own key.
    assert figures["paid"] == INSTANCES
    assert all(n == 1 for n in asked.values()) and len(asked) == INSTANCES
    assert len(on_the_wire) <= CONCURRENCY
    for pk, key in on_the_wire.items():
        call = EndpointCall.objects.get(endpoint=endpoint, instance_id=pk)
        assert call.idempotency_key == key and call.attempts == 2
    assert sum(r.prompt_tokens for r in responses) == 200 * INSTANCES
