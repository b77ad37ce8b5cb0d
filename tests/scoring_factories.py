"""Rows for the scoring tests: verified instances with model responses, tournaments and battles."""

import factory
from django.db import transaction

from annotation.models import Instance, ModelResponse, Tournament
from annotation.preferences.tournaments import sample_battles
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory

REFERENCE_TEXT = "The bicycle is red and leans against a blue door."


def verified_instance(*, family=None, image_count=None, caption=None, **fields):
    """A verified instance with its caption and reference, as the pipeline leaves it."""
    family = family or FamilyFactory()
    instance = InstanceFactory(
        family=family,
        status=Instance.Status.VERIFIED,
        reference_output=fields.pop("reference_output", REFERENCE_TEXT),
        image_count=image_count,
        **fields,
    )
    texts = caption or ["A red bicycle leans against a blue door in bright sunlight."]
    instance.current_caption = CaptionFactory(
        instance=instance,
        texts=texts * instance.instanceimage_set.count() if len(texts) == 1 else texts,
    )
    instance.save()
    return instance


class ModelResponseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelResponse

    instance = factory.LazyFunction(verified_instance)
    model_name = factory.Sequence(lambda n: f"model-{n}")
    text = factory.LazyAttribute(lambda r: f"{r.model_name} says the bicycle is red.")


def with_responses(instance, *model_names):
    return [ModelResponseFactory(instance=instance, model_name=name) for name in model_names]


def create_tournament(*, name, families=(), sample=True, **options):
    """A tournament as a researcher saves it in the admin, with its battles sampled (unless
    sample=False), in one transaction."""
    with transaction.atomic():
        tournament = Tournament.objects.create(name=name, **options)
        if families:
            tournament.families.set(families)
        if sample:
            sample_battles(tournament=tournament)
    return tournament
