"""Rows behind the annotator pages, made through the real services (tests/test_frontend*.py)."""

from urllib.parse import urlencode

from django.core.files import File

from annotation.models import Instance, InstructionFamily, SeedImage, Stage, WorkUnit
from annotation.services import create_work_units, store_reference
from annotation.uploads import store_uploaded_image
from fixtures.demo import IMAGES
from fixtures.loader import skimage_data_dir
from mturk.models import CrowdStudy
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, launch

XSS_INSTRUCTION = 'Count the birds <img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>'


def photo(name="chelsea"):
    """A real CC0 / public-domain photo from scikit-image's data folder, stored like an upload."""
    spec = IMAGES[name]
    with open(skimage_data_dir() / spec.filename, "rb") as handle:
        return store_uploaded_image(upload=File(handle, name=spec.filename), licence=spec.licence,
                                    licence_url=spec.licence_url, author=spec.author,
                                    source_url=spec.source_url)


def _family(name, **fields):
    taken = InstructionFamily.objects.filter(name__startswith=name).count()
    return FamilyFactory(name=name if not taken else f"{name} ({taken + 1})", **fields)


def _instance(family, photos, instruction=None, author=None):
    instance = InstanceFactory(family=family, image_count=0, author=author,
                               **({"instruction": instruction} if instruction else {}))
    for position, name in enumerate(photos):
        instance.instanceimage_set.create(image=photo(name), position=position)
    return instance


def _only_unit(family, stage):
    launch(family, stage)
    create_work_units(family=family, stage=stage)
    return WorkUnit.objects.filter(family=family, stage=stage).latest("id")


def instruction_unit(*, multi=False):
    family = _family(
        "Contextual knowledge of events" if not multi else "Spot the difference",
        is_multi_image=multi, target_instances=1,
        seed_instruction="Why is the cat sitting so still? What might it be watching?"
        if not multi else "What changed between the first and the second photo?",
        seed_response="It is probably watching a bird or an insect outside the frame.",
    )
    for position, name in enumerate(["chelsea", "coffee"] if multi else ["chelsea"]):
        SeedImage.objects.create(family=family, image=photo(name), position=position)
    return _only_unit(family, Stage.INSTRUCTION_GENERATION)


def caption_unit(*, photos=("coffee",), instruction=None, author=None):
    family = _family("Food and drink", is_multi_image=len(photos) > 1)
    _instance(family, photos,
              instruction=instruction or "Is this drink hot or cold? Explain what shows it.",
              author=author)
    return _only_unit(family, Stage.CAPTION)


def verification_unit(*, photos=("astronaut",), caption_text=None, reference_text=None):
    family = _family("People and roles", is_multi_image=len(photos) > 1)
    instance = _instance(family, photos, instruction="What is this person's job? Give the clues.")
    caption = CaptionFactory(
        instance=instance,
        texts=[caption_text or "A smiling woman in an orange flight suit covered in mission "
               "patches stands in front of an American flag, holding a white helmet."] * len(photos),
    )
    Instance.objects.filter(pk=instance.pk).update(current_caption=caption)
    instance.refresh_from_db()
    launch(family, Stage.VERIFICATION)
    store_reference(instance=instance, caption=caption, source="manual",
                    text=reference_text or "She is an astronaut: the flight suit, the mission "
                    "patches and the helmet are what astronauts wear.")
    return WorkUnit.objects.get(family=family, stage=Stage.VERIFICATION)


def study(*, platform, stage, external_id="STUDY123", code="C0DE42", family=None):
    return CrowdStudy.objects.create(platform=platform, stage=stage, family=family,
                                     name=f"{platform} {stage}", external_id=external_id,
                                     completion_code=code)


def mturk_query(*, assignment_id="ASG1", worker_id="AWORKER1", hit_id="HIT1",
                turk_submit_to="https://workersandbox.mturk.com"):
    return urlencode({"assignmentId": assignment_id, "hitId": hit_id, "workerId": worker_id,
                      "turkSubmitTo": turk_submit_to})


PREVIEW_QUERY = urlencode({"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "HIT1"})
