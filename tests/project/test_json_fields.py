"""Every JSON field of the project's models checks that its value can be stored and shown
(`annotation.model_checks.storable_json`): NaN, infinity, a NUL character or a lone surrogate typed
into any of them is a message on the form, where each was a database error, a 500. The fields are
enumerated from the models, so a JSON field added later is held to it the day it is added."""

import math

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse

from annotation.model_checks import StorableJSONField, storable_json
from annotation.models import Tournament

APPS = {"annotation", "mturk", "tasks", "webhooks"}


def json_fields():
    return [field for model in apps.get_models() if model._meta.app_label in APPS
            for field in model._meta.get_fields() if isinstance(field, models.JSONField)]


def test_every_json_field_checks_its_value_is_storable():
    fields = json_fields()
    assert len(fields) >= 37
    assert [f"{field.model._meta.label}.{field.name}" for field in fields
            if not isinstance(field, StorableJSONField) or storable_json not in field.validators] == []


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "a\x00b", "\ud800", {"k": ["\udfff"]}, {"\x00": 1},
                                   [[{"deep": math.nan}]]])
def test_what_cannot_be_stored_is_refused_however_deep(value):
    with pytest.raises(ValidationError):
        storable_json(value)


@pytest.mark.parametrize("value", [None, 0, 1.5, "text", "ünïcödé ✓", [], {}, {"a": [1, "b", None, True]}])
def test_what_can_be_stored_passes(value):
    storable_json(value)


MODEL_NAMES = ["-1", "1.5", "true", "null", '"AB"', '{"A": 1}', "[1, 2]", '["", ""]', '["A", null]', '["A", "A"]',
               '[["A"], "B"]', '[{"a": 1}, "B"]', "NaN", "1e309", '{"a": NaN}', '["\\ud800", "B"]', '["A\\u0000", "B"]',
               '["A\\u001b[31m", "B"]']


@pytest.mark.django_db
@pytest.mark.parametrize("typed", MODEL_NAMES)
def test_a_tournament_s_model_names_are_a_list_of_distinct_names_or_a_message(admin_client, typed):
    from tests.annotation.admin.test_admin_workflow import tournament_form

    response = admin_client.post(reverse("admin:annotation_tournament_add"),
                                 tournament_form(name=f"Named {typed}", model_names=typed, sampling="uniform",
                                                 battle_count="2"))
    assert response.status_code == 200, typed
    assert response.context_data["errors"], typed
    assert not Tournament.objects.exists()
