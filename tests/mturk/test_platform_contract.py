"""What every platform backend owes the services (mturk/platforms/base.py), checked for each one
the registry knows, so a platform added tomorrow is held to it the day it is registered."""

from decimal import Decimal

import pytest

from annotation.models import Worker
from mturk import pay
from mturk.models import CrowdStudy
from mturk.platforms import backend_class, backend_classes, get_backend
from mturk.platforms.base import Backend
from mturk.platforms.local import LocalBackend

BACKENDS = list(backend_classes().values())
CROWD = [backend for backend in BACKENDS if backend.platform not in Worker.IN_HOUSE]


def test_every_platform_of_the_enum_has_a_backend_and_in_house_work_sends_nothing():
    crowd = {platform for platform in Worker.Platform.values if platform not in Worker.IN_HOUSE}
    assert crowd <= set(backend_classes())
    assert all(backend_class(platform) is LocalBackend for platform in Worker.IN_HOUSE)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.platform)
def test_a_backend_names_its_platform_and_what_to_do_without_its_settings(backend):
    assert backend.platform in Worker.Platform.values and backend.label
    assert get_backend(backend.platform).platform == backend.platform
    assert not backend.credential_settings or backend.without_credentials


@pytest.mark.parametrize("backend", CROWD, ids=lambda backend: backend.platform)
def test_a_crowd_backend_reviews_pays_and_confirms_work_its_own_way(backend):
    for method in ("records", "verify", "approve", "reject"):
        assert getattr(backend, method) is not getattr(Backend, method), method
    if backend.bonus_in_two_steps:
        assert callable(backend.set_up_bonus) and callable(backend.pay_set_up_bonus)
    else:
        assert backend.pay_bonus is not Backend.pay_bonus
    # Work arrives by one task per unit, confirmed assignment by assignment, or by a study link,
    # confirmed participant by participant.
    if backend.publishes_per_unit:
        assert backend.confirm_assignment is not Backend.confirm_assignment
    else:
        assert backend.link_parameters is not None
        assert backend.confirms_participant is not Backend.confirms_participant
    assert not backend.grants_qualifications or backend.grant_qualification is not Backend.grant_qualification
    # A worker who failed the test is told how to give their place back on the platform.
    assert backend.give_back_step


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.platform)
def test_a_new_study_starts_with_values_a_study_may_hold(backend):
    fields = {field.name for field in CrowdStudy._meta.get_fields()}
    assert set(backend.study_defaults) <= fields
    study = CrowdStudy(platform=backend.platform, stage="caption", name="A study", **backend.study_defaults)
    study.clean_fields(exclude=[name for name in fields if name not in backend.study_defaults])


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.platform)
def test_a_platform_bills_a_batch_and_a_bonus_and_says_how(backend, settings):
    settings.PLATFORM_FEE_RATES = {}
    bill = pay.billing(backend.platform)
    fees = bill.fees(reward=Decimal("0.50"), assignments_per_task=3, tasks=10)
    assert Decimal("0") <= fees <= Decimal("0.50") * 30
    assert Decimal("0") <= bill.bonus_fee(Decimal("1.00")) <= Decimal("1.00")
    assert bill.rule(3) and bill.note


def test_no_two_study_links_share_a_parameter_name():
    names = [parameter.name for backend in BACKENDS if backend.link_parameters
             for parameter in (backend.link_parameters.participant, backend.link_parameters.study,
                               backend.link_parameters.session)]
    assert len(names) == len(set(names))
