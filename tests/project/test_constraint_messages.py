"""A check constraint a person breaks on a form says what is wrong in words, next to the field it
reads (annotation/model_checks.py), not "Constraint “name” is violated." above the form. Every
model with a check constraint is enumerated, so one added later is held to it the day it is added."""

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.lookups import GreaterThan
from django.urls import reverse

from annotation.model_checks import CheckedFields, fields_read
from annotation.models import Stage, StageConfig
from tests.factories import FamilyFactory


def check_constraints():
    return [(model, constraint) for model in apps.get_models() for constraint in model._meta.constraints
            if isinstance(constraint, models.CheckConstraint)]


def test_every_check_constraint_says_what_is_wrong_in_words_at_its_field():
    found = check_constraints()
    assert len(found) >= 20
    default = models.CheckConstraint(condition=models.Q(pk__gte=0), name="x").violation_error_message
    assert [(model._meta.label, constraint.name) for model, constraint in found
            if constraint.violation_error_message == default or not issubclass(model, CheckedFields)] == []


@pytest.mark.django_db
def test_a_stage_setting_out_of_range_is_refused_at_its_field():
    config = StageConfig(family=FamilyFactory(), stage=Stage.VERIFICATION, posterior_threshold=1.5,
                         prior_accuracy=0.3, overlap=3)
    with pytest.raises(ValidationError) as refused:
        config.full_clean()
    errors = refused.value.message_dict
    assert errors["posterior_threshold"] == ["The posterior threshold is between 0.5 and 1, e.g. 0.95."]
    assert errors["prior_accuracy"][0].startswith("The prior accuracy is between 0.5 and 1")
    assert fields_read(models.Q(a__gt=1) | models.Q(b=2, a__lt=3)) == {"a", "b"}
    assert fields_read(~models.Q(response_a=models.F("response_b"))) == {"response_a", "response_b"}
    # Read through an expression it cannot follow, the error stays the form's, never a 500.
    assert fields_read(GreaterThan(models.F("overlap"), 0)) is None
    assert fields_read(models.Q(GreaterThan(models.F("overlap"), 0))) is None


@pytest.mark.django_db
def test_the_admin_shows_a_broken_range_next_to_its_field(admin_client):
    config = StageConfig.objects.create(family=FamilyFactory(), stage=Stage.VERIFICATION, overlap=3)
    url = reverse("admin:annotation_stageconfig_change", args=[config.pk])
    posted = {name: getattr(config, name) for name in (
        "stage", "overlap", "lease_minutes", "verification_rule", "aggregation", "agree_to_decide", "stopping",
        "on_incorrect", "max_caption_rounds", "model_min_answers", "model_min_posterior", "prior_accuracy")}
    posted.update(family=config.family_id, counts_provisional="on", posterior_threshold=1.5)
    response = admin_client.post(url, posted)
    assert response.status_code == 200
    form = response.context_data["adminform"].form
    assert form.errors["posterior_threshold"] == ["The posterior threshold is between 0.5 and 1, e.g. 0.95."]
    assert "is violated" not in response.content.decode()
