"""Scoped by construction (crowdbench/scoping.py, annotation/group_scope.py): every query of a
group-owned model is narrowed to the scope it runs in, and one made in no scope fails."""

import os
import subprocess
import sys

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.http import JsonResponse
from django.test.utils import CaptureQueriesContext
from django.urls import path

from annotation import teams
from annotation.group_scope import UserScope
from annotation.models import (
    Answer,
    Caption,
    Instance,
    InstructionFamily,
    Membership,
    ResearchGroup,
    Tournament,
    Worker,
)
from crowdbench import scoping
from tests.factories import CaptionFactory, FamilyFactory, InstanceFactory

pytestmark = pytest.mark.django_db
Role = Membership.Role


def _every_model_reaching_a_group():
    """Models whose rows reach a research group by foreign keys, found from the models themselves."""

    def reaches(model, hops):
        if model is ResearchGroup:
            return True
        return hops > 0 and any(
            reaches(field.related_model, hops - 1) for field in model._meta.get_fields()
            if field.many_to_one and field.concrete and field.related_model is not model
            and field.related_model._meta.app_label in OWN_APPS)

    return [model for model in apps.get_models() if model._meta.app_label in OWN_APPS
            and model not in (ResearchGroup, Membership) and reaches(model, 5)]


OWN_APPS = ("annotation", "mturk", "webhooks", "tasks")


def test_every_model_whose_rows_reach_a_group_has_its_path_named_and_is_scoped():
    found = _every_model_reaching_a_group()
    assert len(found) >= 30
    for model in found:
        assert model._meta.label_lower in teams.GROUP_PATHS, (
            f"{model._meta.label} reaches a research group: name its path in GROUP_PATHS")
    for label in teams.GROUP_PATHS:
        model = apps.get_model(label)
        with scoping.entered(None), pytest.raises(scoping.ScopeError, match=model._meta.label):
            model.objects.filter(pk=1).exists()


def test_a_model_no_group_owns_is_read_in_no_scope_and_a_group_owned_one_is_refused():
    with scoping.entered(None):
        assert Worker.objects.count() == 0
        with pytest.raises(scoping.ScopeError, match="every_group"):
            list(Instance.objects.all())


@pytest.fixture
def two_groups():
    vision, speech = teams.create_group(name="Vision lab"), teams.create_group(name="Speech lab")
    users = {}
    for group in (vision, speech):
        user = get_user_model().objects.create_user(f"{group.name}-researcher", password="pw")
        teams.add_member(group=group, user=user, role=Role.RESEARCHER)
        users[group.name] = get_user_model().objects.get(pk=user.pk)
    ours = CaptionFactory(instance=InstanceFactory(family=FamilyFactory(name="Recipes", group=vision)),
                          texts=["vision's caption"])
    theirs = CaptionFactory(instance=InstanceFactory(family=FamilyFactory(name="Signs", group=speech)),
                            texts=["speech's caption"])
    return users, ours, theirs


def test_in_a_member_s_scope_every_manager_reads_their_group_s_rows_only(two_groups):
    users, ours, theirs = two_groups
    with scoping.entered(UserScope(users["Vision lab"])):
        assert list(Caption.objects.values_list("texts", flat=True)) == [["vision's caption"]]
        assert list(InstructionFamily.objects.values_list("name", flat=True)) == ["Recipes"]
        # Related managers are the model's manager too.
        assert theirs.instance.captions.count() == 0
        assert ours.instance.captions.count() == 1
        assert not Instance.objects.filter(pk=theirs.instance_id).exists()


def test_a_row_locked_in_a_member_s_scope_is_narrowed_without_joining_what_it_hangs_from(two_groups):
    users, ours, _ = two_groups
    with scoping.entered(UserScope(users["Vision lab"])), CaptureQueriesContext(connection) as queries:
        list(Answer.objects.select_for_update().filter(pk=1))
    locking = queries.captured_queries[-1]["sql"]
    assert "FOR UPDATE" in locking and " JOIN " not in locking


def test_a_query_begun_in_no_scope_is_narrowed_by_the_scope_it_runs_in_and_refused_in_none(two_groups):
    users, ours, theirs = two_groups
    with scoping.entered(None):
        # As a filter or a choice list a module builds when it is imported.
        begun = Caption.objects.all()
        families = InstructionFamily.objects.order_by("name")
        with pytest.raises(scoping.ScopeError):
            list(begun)
    with scoping.entered(UserScope(users["Vision lab"])):
        assert [caption.pk for caption in begun.all()] == [ours.pk]
        assert begun.count() == 1 and begun.filter(pk=theirs.pk).exists() is False
        assert list(families.values_list("name", flat=True)[:5]) == ["Recipes"]
        assert Instance.objects.filter(captions__in=begun).count() == 1
        assert begun.update(texts=["changed"]) == 1
    with scoping.entered(UserScope(users["Speech lab"])):
        assert families.get().name == "Signs"
    theirs.refresh_from_db()
    assert theirs.texts == ["speech's caption"]


def test_a_web_process_loads_every_module_and_url_in_no_scope():
    """A module that read a group's rows as it was imported would fail here, as gunicorn would."""
    loaded = subprocess.run([sys.executable, "-c", _LOAD_EVERYTHING], cwd=settings.BASE_DIR, env=os.environ,
                            capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.strip().endswith("loaded in no scope")


_LOAD_EVERYTHING = """
import importlib, os, pkgutil
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
import django
django.setup()
from django.urls import get_resolver
from crowdbench import scoping
assert scoping.current() is None
get_resolver().check()
for package in ("annotation", "mturk", "webhooks", "frontend", "tasks", "crowdbench"):
    for found in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        if ".migrations" not in found.name and ".management.commands" not in found.name:
            importlib.import_module(found.name)
print("loaded in no scope")
"""


def test_a_job_run_inside_a_member_s_request_works_for_every_group(two_groups):
    users, _, _ = two_groups
    with scoping.entered(UserScope(users["Vision lab"])), scoping.every_group("a job"):
        assert Caption.objects.count() == 2


def _a_page_that_forgot_the_scope(request):
    # Written as a new page might be, with no word of groups.
    return JsonResponse({"captions": [text for texts in Caption.objects.values_list("texts", flat=True)
                                      for text in texts],
                         "tournaments": list(Tournament.objects.values_list("name", flat=True))})


urlpatterns = [path("forgot/", _a_page_that_forgot_the_scope)]


@pytest.mark.urls(__name__)
def test_a_page_that_forgets_the_scope_still_shows_each_member_their_group_s_rows_only(two_groups, client):
    users, _, _ = two_groups
    Tournament.objects.create(name="Speech models", group=ResearchGroup.objects.get(name="Speech lab"))
    client.force_login(users["Vision lab"])
    assert client.get("/forgot/").json() == {"captions": ["vision's caption"], "tournaments": []}
    client.force_login(users["Speech lab"])
    assert client.get("/forgot/").json() == {"captions": ["speech's caption"], "tournaments": ["Speech models"]}


def test_a_name_another_group_holds_is_refused_as_taken_without_a_server_error(two_groups, client):
    users, _, _ = two_groups
    client.force_login(users["Speech lab"])
    answer = client.post("/admin/annotation/instructionfamily/add/", {
        "name": "Recipes", "description": "", "source": InstructionFamily.Source.NEW, "target_instances": 10,
        "group": ResearchGroup.objects.get(name="Speech lab").pk,
    })
    assert answer.status_code == 200
    assert "Instruction family with this Name already exists." in answer.content.decode()
    assert InstructionFamily.objects.filter(name="Recipes").count() == 1
