"""Rows behind the annotator pages, made through the real services (tests/frontend/)."""

from decimal import Decimal
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.core.files import File
from django.test import Client

from annotation.collection.references import store_reference
from annotation.collection.uploads import store_uploaded_image
from annotation.crowdwork.stages import create_work_units
from annotation.models import (
    GoldItem,
    Instance,
    InstructionFamily,
    ModelResponse,
    SeedImage,
    Stage,
    StageQualification,
    WorkUnit,
)
from annotation.preferences.tournaments import launch_tournament
from fixtures.images import IMAGES
from fixtures.loader import skimage_data_dir
from mturk.models import CrowdStudy, Hit
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory, launch
from tests.scoring_factories import create_tournament, decided_as_a_sheet_decides

XSS_INSTRUCTION = 'Count the birds <img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>'
XSS_RESPONSE = ('The cat watches a bird. <img src=x onerror="window.__xss=3">'
                '<script>window.__xss=4</script> <a href="javascript:window.__xss=5">more</a>')
LONG_RESPONSE = " ".join(
    f"Point {n}: the cat sits on the windowsill, its ears turned towards the garden, where "
    "something small is moving in the hedge." for n in range(1, 41))
RUBRIC = ("Does the response ground its answer in what the image shows?\n"
          "Score 1: ignores the image.\nScore 2: mentions the image but gets most of it wrong.\n"
          "Score 3: partly grounded.\nScore 4: grounded, with a small slip.\n"
          "Score 5: every claim is visible in the image.")


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


# A real-looking Prolific study id, and a caption study behind it with `units` instances waiting.
PROLIFIC_STUDY_ID = "60f6acb180a7b59ac0621f9e"


def prolific_caption_study(units):
    family = FamilyFactory()
    for _ in range(units):
        InstanceFactory(family=family)
    launch(family, Stage.CAPTION)
    create_work_units(family=family, stage=Stage.CAPTION)
    return CrowdStudy.objects.create(platform="prolific", stage=Stage.CAPTION, family=family, name="Captions",
                                     external_id=PROLIFIC_STUDY_ID, completion_code="C1ABCD23",
                                     reward_usd=Decimal("0.75"))


def prolific_link(stage, *, participant="P1", study_id="STUDY123", session="S1"):
    """The study link a Prolific participant arrives by (the study made by `study`)."""
    return f"/work/{stage}/?" + urlencode(
        {"PROLIFIC_PID": participant, "STUDY_ID": study_id, "SESSION_ID": session})


def logged_in(name="ann"):
    """A browser signed in as a new in-house annotator."""
    client = Client()
    client.force_login(get_user_model().objects.create_user(name, password="annotate-me-42"))
    return client


def mturk_query(*, assignment_id="ASG1", worker_id="AWORKER1", hit_id="HIT1",
                turk_submit_to="https://workersandbox.mturk.com"):
    return urlencode({"assignmentId": assignment_id, "hitId": hit_id, "workerId": worker_id,
                      "turkSubmitTo": turk_submit_to})


def published_hit(unit):
    """The unit published as an MTurk HIT, recorded as mturk.services.publish_batch records it."""
    mturk_study, _ = CrowdStudy.objects.get_or_create(platform="mturk", stage=unit.stage,
                                                      name=f"MTurk {unit.stage}")
    hit, _ = Hit.objects.get_or_create(
        study=mturk_study, unit=unit,
        defaults={"hit_id": f"3HIT{unit.pk:016d}", "hit_type_id": "3HITTYPE", "environment": "sandbox",
                  "max_assignments": unit.overlap, "reward_usd": Decimal("0.50"),
                  "status": Hit.Status.OPEN})
    return hit


def confirmed_by_sync(assignment):
    """The Submission a sync of the unit's HIT records for this assignment: MTurk's word that the
    assignment is this worker's."""
    hit = published_hit(assignment.unit)
    from mturk.models import Submission

    submission = Submission.objects.create(study=hit.study, worker=assignment.worker, hit=hit,
                                           platform_assignment_id=assignment.platform_assignment_id,
                                           platform_status="Submitted")
    submission.assignments.add(assignment)
    return submission


def unit_url(unit, **query):
    """The page MTurk opens for a worker who accepted the unit's HIT."""
    query.setdefault("hit_id", published_hit(unit).hit_id)
    return f"/work/unit/{unit.pk}/?{mturk_query(**query)}"


def accept(client, unit, **query):
    """An MTurk worker opens the HIT they accepted: the unit's page, answered 200."""
    response = client.get(unit_url(unit, **query))
    assert response.status_code == 200, response.content
    return response


def preview_url(unit):
    """The page MTurk shows in a HIT's preview: no assignment, no worker id."""
    query = {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": published_hit(unit).hit_id}
    return f"/work/unit/{unit.pk}/?{urlencode(query)}"


def pairwise_unit(*, left_text="The cat is watching a bird outside the window: its ears point "
                  "forward and its eyes are fixed on one spot.", right_text=LONG_RESPONSE,
                  with_criteria=False, with_rubric=False, photos=("chelsea",), seed=0):
    """One launched battle of two model responses, through the real preference services."""
    family = _family("Animals and their behaviour", is_multi_image=len(photos) > 1)
    instance = _instance(family, photos, instruction="What is the cat looking at? Explain the clues.")
    Instance.objects.filter(pk=instance.pk).update(status=Instance.Status.VERIFIED,
                                                   reference_output="A bird outside.")
    instance.refresh_from_db()
    decided_as_a_sheet_decides(instance).save()
    ModelResponse.objects.create(instance=instance, model_name="model-a", text=left_text)
    ModelResponse.objects.create(instance=instance, model_name="model-b", text=right_text)
    tournament = create_tournament(
        name=f"Tournament of {family.name}", families=[family], include_reference=False,
        with_criteria=with_criteria, with_rubric=with_rubric, rubric=RUBRIC if with_rubric else "",
        judgements_per_pair=1, seed=seed)
    launch_tournament(tournament=tournament)
    return WorkUnit.objects.get(family=family, stage=Stage.PAIRWISE)


def qualification_test(stage=Stage.VERIFICATION, *, size=5, live_gold_every=None, **fields):
    """A stage's test of `size` gold items, answered correct / incorrect in turn; mixed into live
    work (every `live_gold_every` tasks) only when that is given."""
    live = live_gold_every is not None
    live_gold_every = live_gold_every or 10
    qualification = StageQualification.objects.create(
        stage=stage, name="Checking responses", test_size=size, live_gold_every=live_gold_every,
        description="Five short tasks like the real ones: is the response right for the image?",
        **fields)
    for n in range(size):
        GoldItem.objects.create(
            qualification=qualification,
            content={"instruction": f"How many cups are on the table? ({n + 1})",
                     "caption": "Two white cups stand on a wooden table.",
                     "response": "There are two cups." if n % 2 == 0 else "There are three cups."},
            question="Is the response correct?", options=["correct", "incorrect"],
            answer="correct" if n % 2 == 0 else "incorrect",
            explanation="The caption shows two cups." if n % 2 == 0
            else "Three is wrong: the caption shows two cups.", in_live_work=live)
    return qualification


def right_answers(attempt, *, wrong=0):
    items = GoldItem.objects.in_bulk(attempt.item_ids)
    answers = {}
    for index, pk in enumerate(attempt.item_ids):
        answer = items[pk].answer
        if index < wrong:
            answer = "incorrect" if answer == "correct" else "correct"
        answers[f"item-{pk}"] = answer
    return answers
