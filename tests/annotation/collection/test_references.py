import hashlib
from decimal import Decimal
from io import StringIO

import openai
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.collection.references import NOT_CONFIGURED_MESSAGE, generate_reference, reference_prompt
from annotation.exceptions import AnnotationError
from annotation.models import Instance, Reference, Stage, WorkUnit
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, launch
from tests.openai_fake import completion, rate_limited, server_error

pytestmark = pytest.mark.django_db

ANSWER = "He is waving to greet the crowd gathered for the parade."


def awaiting_reference(**instance_fields):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE, **instance_fields)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    return instance


def test_prompt_for_one_image_is_the_papers():
    prompt = reference_prompt(instruction="Why is he waving?",
                              captions=["A man waves from a float in a parade."])
    assert prompt == (
        "Consider an image depicted by: 'A man waves from a float in a parade.'. Now, briefly "
        "follow this instruction, and you can add a short explanation: 'Why is he waving?'. "
        "Response:"
    )


def test_prompt_for_several_images_numbers_one_caption_per_image():
    prompt = reference_prompt(instruction="What changed between the two pictures?",
                              captions=["A full glass of milk.", "An empty glass."])
    assert prompt == (
        "Consider a set of 2 images. Image 1 is depicted by: 'A full glass of milk.'. "
        "Image 2 is depicted by: 'An empty glass.'. Now, briefly follow this instruction, and you "
        "can add a short explanation: 'What changed between the two pictures?'. Response:"
    )


def test_request_sends_the_prompt_as_one_user_message_to_the_configured_model(
    openai_server, settings
):
    openai_server.script(completion(ANSWER))
    instance = awaiting_reference()
    generate_reference(instance=instance)
    request, = openai_server.requests
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.body["model"] == "gpt-4"
    assert request.body["max_tokens"] == settings.OPENAI_MAX_OUTPUT_TOKENS
    assert request.body["messages"] == [{
        "role": "user",
        "content": reference_prompt(instruction=instance.instruction,
                                    captions=instance.current_caption.texts),
    }]


def test_generated_reference_stores_model_prompt_raw_output_tokens_and_cost(openai_server):
    openai_server.script(completion(ANSWER, prompt_tokens=120, completion_tokens=40))
    instance = awaiting_reference()
    reference = generate_reference(instance=instance)
    reference.refresh_from_db()
    assert reference.source == Reference.Source.GENERATED
    assert reference.text == ANSWER
    assert reference.model == "gpt-4"
    assert reference.caption == instance.current_caption
    assert reference.prompt.startswith("Consider an image depicted by: 'A red bicycle")
    assert reference.prompt_sha256 == hashlib.sha256(reference.prompt.encode()).hexdigest()
    assert reference.raw_output["choices"][0]["message"]["content"] == ANSWER
    assert reference.raw_output["model"] == "gpt-4-0613"
    assert (reference.prompt_tokens, reference.completion_tokens) == (120, 40)
    # gpt-4: $30 per million input tokens, $60 per million output tokens.
    assert reference.cost_usd == Decimal("0.006000")


def test_model_without_a_price_stores_tokens_but_no_cost(openai_server, settings):
    settings.OPENAI_REFERENCE_MODEL = "llava-local"
    openai_server.script(completion(ANSWER, prompt_tokens=120, completion_tokens=40))
    reference = generate_reference(instance=awaiting_reference())
    assert reference.model == "llava-local"
    assert reference.prompt_tokens == 120
    assert reference.cost_usd is None


def test_rate_limit_then_server_error_then_success_stores_one_reference(openai_server):
    openai_server.script(rate_limited(), server_error(), completion(ANSWER))
    instance = awaiting_reference()
    generate_reference(instance=instance)
    assert len(openai_server.requests) == 3
    assert list(instance.references.values_list("text", flat=True)) == [ANSWER]


def test_generating_twice_calls_the_model_once_and_stores_one_reference(openai_server):
    openai_server.script(completion(ANSWER), completion("A different answer."))
    instance = awaiting_reference()
    first = generate_reference(instance=instance)
    second = generate_reference(instance=Instance.objects.get(pk=instance.pk))
    assert second == first
    assert len(openai_server.requests) == 1
    assert instance.references.count() == 1


def test_persistent_server_errors_raise_after_the_configured_retries_and_store_nothing(
    openai_server, settings
):
    settings.OPENAI_MAX_RETRIES = 2
    openai_server.script(server_error(), server_error(), server_error())
    instance = awaiting_reference()
    with pytest.raises(openai.InternalServerError):
        generate_reference(instance=instance)
    assert len(openai_server.requests) == 3
    assert not Reference.objects.exists()
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_REFERENCE


def test_no_model_configured_raises_the_message_saying_what_to_set(settings):
    settings.OPENAI_REFERENCE_MODEL = ""
    with pytest.raises(AnnotationError) as raised:
        generate_reference(instance=awaiting_reference())
    assert str(raised.value) == NOT_CONFIGURED_MESSAGE
    for setting in ("OPENAI_REFERENCE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        assert setting in NOT_CONFIGURED_MESSAGE


def test_instance_not_awaiting_a_reference_is_skipped_without_calling_the_model(openai_server):
    instance = InstanceFactory(status=Instance.Status.VERIFIED)
    assert generate_reference(instance=instance) is None
    assert openai_server.requests == []


def test_reference_sends_the_instance_to_a_verification_unit_when_that_stage_is_launched(
    openai_server,
):
    openai_server.script(completion(ANSWER))
    family = FamilyFactory()
    launch(family, Stage.VERIFICATION, overlap=3)
    instance = awaiting_reference(family=family)
    reference = generate_reference(instance=instance)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_VERIFICATION
    unit = WorkUnit.objects.get(stage=Stage.VERIFICATION, reference=reference)
    assert (unit.instance, unit.overlap) == (instance, 3)


def test_command_generates_references_of_one_family_and_prints_the_total_cost(openai_server):
    openai_server.script(completion(ANSWER), completion(ANSWER))
    family = FamilyFactory(name="Contextual knowledge of events")
    first, second = awaiting_reference(family=family), awaiting_reference(family=family)
    other_family = awaiting_reference()
    out = _call("generate_references", "--family", "Contextual knowledge of events")
    assert first.references.count() == second.references.count() == 1
    assert not other_family.references.exists()
    assert "Generated 2 reference(s), 0 failed; total cost $0.012000." in out


def test_command_without_a_model_says_what_to_set(settings):
    settings.OPENAI_REFERENCE_MODEL = ""
    with pytest.raises(CommandError, match="OPENAI_REFERENCE_MODEL"):
        _call("generate_references")


def _call(*args):
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()
