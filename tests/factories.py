import factory
from django.utils import timezone

from annotation.models import (
    Assignment,
    Caption,
    ImageAsset,
    Instance,
    InstanceImage,
    InstructionFamily,
    Reference,
    Stage,
    StageConfig,
    Worker,
    WorkUnit,
)


class WorkerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Worker

    platform = Worker.Platform.MTURK
    external_id = factory.Sequence(lambda n: f"A{n:012d}")


class ImageAssetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ImageAsset

    url = factory.Sequence(lambda n: f"https://images.example.org/{n}.jpg")
    licence = "CC BY 2.0"
    author = "A. Photographer"


class FamilyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = InstructionFamily

    name = factory.Sequence(lambda n: f"Family {n}")
    description = "Questions about contextual knowledge of events."
    seed_instruction = "Why is he waving? What happened in this event?"
    seed_response = "He is greeting the crowd of protesters."
    target_instances = 10


class InstanceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Instance
        skip_postgeneration_save = True

    family = factory.SubFactory(FamilyFactory)
    instruction = factory.Sequence(lambda n: f"What is unusual about this picture? ({n})")

    @factory.post_generation
    def image_count(self, create, extracted, **kwargs):
        count = extracted if extracted is not None else (2 if self.family.is_multi_image else 1)
        for position in range(count):
            InstanceImage.objects.create(instance=self, image=ImageAssetFactory(), position=position)


class CaptionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Caption

    instance = factory.SubFactory(InstanceFactory)
    texts = factory.LazyAttribute(
        lambda caption: ["A red bicycle leans against a blue door in bright sunlight."]
        * caption.instance.instanceimage_set.count()
    )


class ReferenceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Reference

    instance = factory.SubFactory(InstanceFactory, status=Instance.Status.AWAITING_VERIFICATION)
    text = "The bicycle is red and the door is blue."
    source = Reference.Source.MANUAL


def launch(family, stage, *, overlap=1, lease_minutes=30, **options):
    """A launched stage without going through the background job (tests call services directly)."""
    config, _ = StageConfig.objects.update_or_create(
        family=family, stage=stage,
        defaults={"overlap": overlap, "lease_minutes": lease_minutes, "launched_at": timezone.now(),
                  **options},
    )
    return config


__all__ = ["Stage", "launch"]


def awaiting_reference(**instance_fields):
    """An instance whose caption is in, waiting for its reference to be generated."""
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE, **instance_fields)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    return instance


def submitted_in_study(study, worker, *, key, platform_assignment_id):
    """A unit of the crowd study's stage that `worker` submitted from that study, bound to the
    platform's ids as a study link binds them."""
    unit = WorkUnit.objects.create(stage=study.stage, key=key, family=study.family)
    return Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                     lease_expires_at=unit.created_at, platform_listing_id=study.external_id,
                                     platform_assignment_id=platform_assignment_id)
