"""Places published for a stage with no open units ready send every arrival away with nothing
(issue 39: 0 of 30 arrivals got work). Publishing says how many open units are ready, and
refuses when none is unless the researcher ticks that they mean it."""

from decimal import Decimal

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from annotation.crowdwork.stages import create_work_units
from annotation.models import Stage
from mturk.exceptions import PlatformError
from mturk.models import AuditLog, CrowdStudy
from mturk.services import publishing
from tests.factories import FamilyFactory, InstanceFactory, launch
from tests.mturk_wire import make_researcher

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:mturk_crowdstudy_changelist")


def prolific_study(family=None):
    return CrowdStudy.objects.create(platform="prolific", stage=Stage.CAPTION, family=family,
                                     name="Captions on Prolific", external_id="60f6acb180a7b59ac0621f9e",
                                     completion_code="C1ABCD23", reward_usd=Decimal("0.75"))


def family_with_instances(n, name="Parades"):
    family = FamilyFactory(name=name)
    for _ in range(n):
        InstanceFactory(family=family)
    return family


def test_places_for_a_stage_never_launched_are_refused_and_say_so():
    study = prolific_study(family_with_instances(3))
    with pytest.raises(PlatformError) as refused:
        publishing.publish_batch(study=study, tasks=30, actor=make_researcher())
    assert str(refused.value).startswith(
        "Nothing was recorded: 0 open units are ready for this study: the instruction-conditioned caption "
        "stage was never launched for “Parades”")
    study.refresh_from_db()
    assert study.places_published == 0 and not AuditLog.objects.exists()


def test_a_study_of_every_family_counts_the_families_it_draws_on_and_the_units_waiting_unlaunched():
    family = family_with_instances(2)
    launch(family, Stage.CAPTION)
    create_work_units(family=family, stage=Stage.CAPTION)
    family.stage_configs.update(launched_at=None)  # launched, units made, then stopped
    FamilyFactory()
    work = publishing.open_work(prolific_study())
    assert (work.units, work.launched, work.waiting_unlaunched) == (0, 0, 2)
    assert "launched for none of the 2 families this study draws on (2 open unit(s) wait where it is not " \
           "launched)" in work.shortfall()


def test_places_for_a_launched_stage_with_every_unit_done_are_refused_too():
    family = FamilyFactory(name="Parades")
    launch(family, Stage.CAPTION)
    with pytest.raises(PlatformError, match="has no open units left where it is launched"):
        publishing.publish_batch(study=prolific_study(family), tasks=5, actor=make_researcher())


def test_the_researcher_may_publish_anyway_and_is_warned_in_the_result():
    study = prolific_study(family_with_instances(1))
    done = publishing.publish_batch(study=study, tasks=30, actor=make_researcher(), without_open_work=True)
    assert done.places == 30
    assert "Warning: 0 open units are ready for this study" in done.message


def test_places_with_work_ready_say_how_many_open_units_there_are():
    family = family_with_instances(3)
    launch(family, Stage.CAPTION)
    create_work_units(family=family, stage=Stage.CAPTION)
    done = publishing.publish_batch(study=prolific_study(family), tasks=30, actor=make_researcher())
    assert "3 open unit(s) of the stage are ready for its participants" in done.message


def test_the_publish_form_shows_the_open_units_before_the_click_and_asks_for_the_tick(client):
    study = prolific_study(family_with_instances(2))
    client.force_login(make_researcher())
    form = client.post(CHANGELIST, {"action": "publish_batch", "_selected_action": [study.pk],
                                    "index": "0"}).content.decode()
    assert "0 open units are ready for this study" in form and "Publish even though no work is ready" in form

    refused = client.post(CHANGELIST, {"action": "publish_batch", "_selected_action": [study.pk],
                                       "apply": "1", "tasks": "30"}, follow=True)
    (said,) = [str(m) for m in get_messages(refused.wsgi_request) if "recorded" in str(m).lower()]
    assert "Nothing was recorded: 0 open units are ready" in said
    study.refresh_from_db()
    assert study.places_published == 0

    anyway = client.post(CHANGELIST, {"action": "publish_batch", "_selected_action": [study.pk],
                                      "apply": "1", "tasks": "30", "without_open_work": "on"}, follow=True)
    (said,) = [str(m) for m in get_messages(anyway.wsgi_request) if "recorded" in str(m).lower()]
    assert "Recorded 30 place(s)" in said and "Warning: 0 open units are ready" in said
    study.refresh_from_db()
    assert study.places_published == 30
