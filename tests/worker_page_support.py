"""A small crowd for the worker page's tests: verifiers, pairwise judges and captioners with known
habits (one too fast, one always clicking left, one always answering "Correct", one copying its
captions) beside steady workers, written as rows the way the services leave them."""

import html
from dataclasses import dataclass

from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from annotation.models import (
    Assignment,
    Caption,
    HumanJudgement,
    Instance,
    Stage,
    Verification,
    WorkUnit,
)
from tests.factories import FamilyFactory, InstanceFactory, ReferenceFactory, WorkerFactory
from tests.review_support import make_reviewer
from tests.scoring_factories import create_tournament, verified_instance, with_responses

REFERENCES = 20
MODELS = ("llava", "otter", "blip2", "instructblip", "mplug", "gpt4v")  # 15 battles


def truth(number):
    """Whether reference `number` is correct, as the steady verifiers find it (one in four)."""
    return number % 4 == 0


def answer(worker, unit, *, seconds):
    now = timezone.now()
    return Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                     lease_expires_at=now, submitted_at=now, active_seconds=seconds)


@dataclass
class Crowd:
    steady: object
    steady_too: object
    too_fast: object
    always_left: object
    always_correct: object
    copier: object


def crowd():
    family = FamilyFactory()
    steady, steady_too, too_fast, always_left, always_correct, copier = (
        WorkerFactory(external_id=f"A1{name.upper()}") for name in
        ("steady", "steadytoo", "toofast", "alwaysleft", "alwayscorrect", "copier"))

    for number in range(REFERENCES):
        reference = ReferenceFactory(instance__family=family)
        unit = WorkUnit.objects.create(stage=Stage.VERIFICATION, key=f"reference:{reference.pk}", family=family,
                                       reference=reference, overlap=4)
        for worker, seconds, vote in ((steady, 40 + number, truth(number)), (steady_too, 70 - number, truth(number)),
                                      (too_fast, 3, truth(number)), (always_correct, 45, True)):
            Verification.objects.create(reference=reference, worker=worker, is_correct=vote,
                                        problem_in_response=not vote,
                                        assignment=answer(worker, unit, seconds=seconds))

    instance = verified_instance(family=family)
    with_responses(instance, *MODELS)
    tournament = create_tournament(name="Worker page pilot", include_reference=False)
    for number, battle in enumerate(tournament.battles.order_by("pk")):
        unit = WorkUnit.objects.create(stage=Stage.PAIRWISE, key=f"battle:{battle.pk}", family=family,
                                       battle=battle, overlap=3)
        shown_left = HumanJudgement.ShownLeft.A if number % 2 else HumanJudgement.ShownLeft.B
        # The steady workers prefer response A wherever it is shown; the other clicks left.
        for worker, choice in ((steady, "left" if shown_left == "a" else "right"),
                               (steady_too, "left" if shown_left == "a" else "right"),
                               (always_left, "left")):
            HumanJudgement.objects.create(battle=battle, worker=worker, shown_left=shown_left, choice=choice,
                                          assignment=answer(worker, unit, seconds=50))

    texts = {copier: ["A red bicycle against a blue door."] * 2 + ["a red  bicycle against a BLUE door. "]
             + ["Three cups on a wooden table."],
             steady: [f"Caption {n}: a scene with {n} cups." for n in range(4)]}
    for n in range(4):
        captioned = InstanceFactory(family=family, status=Instance.Status.AWAITING_REFERENCE)
        unit = WorkUnit.objects.create(stage=Stage.CAPTION, key=f"caption:{captioned.pk}", family=family,
                                       instance=captioned, overlap=2)
        for worker, written in texts.items():
            Caption.objects.create(instance=captioned, texts=[written[n]], author=worker,
                                   assignment=answer(worker, unit, seconds=90))
    return Crowd(steady, steady_too, too_fast, always_left, always_correct, copier)


def page_of(client, worker):
    response = client.get(reverse("admin:annotation_worker_page", args=[worker.pk]))
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def flags_in(text):
    return {key for key in ("too_fast", "same_side", "one_option", "copies") if f'data-flag="{key}"' in text}


def make_reviewer_who_sees_workers():
    user = make_reviewer()
    user.user_permissions.add(Permission.objects.get(codename="view_worker"))
    return type(user).objects.get(pk=user.pk)
