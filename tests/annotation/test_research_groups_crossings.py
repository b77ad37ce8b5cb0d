"""Where research groups cross: a snapshot numbered after another group's, a viewer's actions, a
member of two groups who only views one of them, an "everything" webhook endpoint, an endpoint
model's key variable, and the jobs list. Each rule is held once and tested here over every place it
covers (every admin action; every group-owned choice on every admin form)."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import RequestFactory
from django.urls import reverse

from annotation import teams
from annotation.admin.teams import GroupScopedAdminMixin
from annotation.models import Membership, ModelEndpoint, ModelResponse, Snapshot, Tournament
from crowdbench import scoping
from crowdbench.events import emit
from tests.annotation.test_research_groups import Lab, _api
from tests.factories import InstanceFactory
from webhooks.models import Delivery, Endpoint

pytestmark = pytest.mark.django_db
Role = Membership.Role


@pytest.fixture(autouse=True)
def _fresh_cache_and_a_snapshot_folder(fresh_cache, snapshot_folder):
    return None


@pytest.fixture
def lab():
    return Lab()


def test_a_group_s_snapshot_is_numbered_after_every_other_group_s(lab, client):
    vision = _api(lab.people[Role.RESEARCHER]).post("/api/snapshots/", {"note": "vision"}, format="json")
    assert vision.status_code == 202
    speech = _api(lab.outsider).post("/api/snapshots/", {"note": "speech"}, format="json")
    assert speech.status_code == 202, speech.content
    assert speech.json()["version"] == vision.json()["version"] + 1

    lab.client_of(lab.people[Role.RESEARCHER], client)
    added = client.post(reverse("admin:annotation_snapshot_add"), {"note": "from the admin", "group": lab.vision.pk})
    assert added.status_code == 302, added.context_data["errors"]
    with scoping.every_group("the test counts every group's snapshots"):
        assert sorted(Snapshot.objects.values_list("version", flat=True)) == [1, 2, 3]


def test_every_admin_action_says_what_permission_it_needs():
    """Django offers an action with no `allowed_permissions` to whoever may open the list: a viewer
    queued another group's jobs again and resumed paused workers so."""
    bare = []
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in {"annotation", "mturk", "tasks", "webhooks"}:
            continue
        for action, name, _ in model_admin._get_base_actions():
            if not getattr(action, "allowed_permissions", None):
                bare.append(f"{model._meta.label}.{name}")
    assert bare == []


def test_a_viewer_is_offered_no_action_and_runs_none(lab, client):
    viewer = lab.people[Role.VIEWER]
    request = RequestFactory().get("/")
    request.user = viewer
    offered = {f"{model._meta.label}.{name}" for model, model_admin in admin.site._registry.items()
               if model._meta.app_label in {"annotation", "mturk", "tasks", "webhooks"}
               and model_admin.has_view_permission(request)
               for name in model_admin.get_actions(request)}
    assert offered == set()


def test_the_jobs_list_is_for_staff_outside_groups(lab, client):
    lab.client_of(lab.people[Role.OWNER], client)
    assert client.get(reverse("admin:tasks_job_changelist")).status_code == 403


def test_a_member_who_only_views_a_group_writes_nothing_into_it_nor_draws_on_it(lab, client):
    both = lab.people[Role.RESEARCHER]
    teams.add_member(group=lab.speech, user=both, role=Role.VIEWER)
    theirs = InstanceFactory(family=lab.other_family)
    lab.client_of(get_user_model().objects.get(pk=both.pk), client)

    response = client.post(reverse("admin:annotation_modelresponse_add"),
                           {"instance": theirs.pk, "model_name": "x-model", "text": "An answer."})
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    tournament = client.post(reverse("admin:annotation_tournament_add"), {
        "name": "Drawing on speech", "group": lab.vision.pk, "families": [lab.other_family.pk]})
    assert tournament.status_code == 200 and "is not one of the available choices" in tournament.content.decode()
    with scoping.every_group("the test looks for what was written"):
        assert not ModelResponse.objects.filter(model_name="x-model").exists()
        assert not Tournament.objects.filter(name="Drawing on speech").exists()


def test_every_group_owned_choice_on_an_admin_form_lists_only_rows_its_writer_may_change(lab):
    """For every admin of a group-owned model, every field choosing a group-owned row: a member of
    two groups, viewer of one, is offered the rows of the group they change only."""
    both = lab.people[Role.RESEARCHER]
    teams.add_member(group=lab.speech, user=both, role=Role.VIEWER)
    both = get_user_model().objects.get(pk=both.pk)
    request = RequestFactory().get("/")
    request.user = both
    InstanceFactory(family=lab.other_family)
    offered_theirs = []
    for model, model_admin in admin.site._registry.items():
        if not isinstance(model_admin, GroupScopedAdminMixin):
            continue
        for field in model._meta.get_fields():
            related = getattr(field, "related_model", None)
            if not (field.concrete and related and teams.group_path(related)) or field.name == "group":
                continue
            if field.many_to_many:
                formfield = model_admin.formfield_for_manytomany(field, request)
            elif field.many_to_one:
                formfield = model_admin.formfield_for_foreignkey(field, request)
            else:
                continue
            if formfield is None:
                continue
            with scoping.entered(scoping.EveryGroup("the test reads the choices as offered")):
                owners = {teams.owner(row, via=teams.group_path(related)) for row in formfield.queryset}
            if lab.speech in owners:
                offered_theirs.append(f"{model._meta.label}.{field.name}")
    assert offered_theirs == []


def test_an_everything_endpoint_hears_only_of_rows_of_no_group(lab, receiver_url="https://hooks.example.org/all"):
    everything = Endpoint.objects.create(url=receiver_url, events=["stage.launched"], secret="s")
    theirs = Endpoint.objects.create(url=receiver_url + "/speech", events=["stage.launched"], secret="s",
                                     family=lab.other_family)
    with scoping.every_group("an event emitted by a job"):
        emit(event="stage.launched", scope=lab.other_family, payload={"stage": "caption"}, key="speech-caption")
        told = set(Delivery.objects.values_list("endpoint", flat=True))
    assert told == {theirs.pk}
    assert everything.pk not in told


@pytest.mark.parametrize("name", ["DJANGO_SECRET_KEY", "DATABASE_URL", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY"])
def test_an_endpoint_model_may_name_only_a_variable_the_operator_set_aside_for_keys(lab, name, settings,
                                                                                    monkeypatch):
    settings.ENDPOINT_MODEL_KEY_VARIABLES = ["VLLM_API_KEY"]
    monkeypatch.setenv(name, "a-secret-of-the-site")
    endpoint = ModelEndpoint(tournament=lab.tournament, model_name="mine", base_url="https://api.example.org/v1",
                             model="m", api_key_env=name)
    with pytest.raises(ValidationError) as refused:
        endpoint.full_clean()
    assert "is not a variable endpoint models may read" in str(refused.value) and "VLLM_API_KEY" in str(refused.value)

    from annotation import llm

    # A row saved before the rule sends nothing: its key is never read.
    assert llm._endpoint_key(endpoint) == ""
    assert "is not a variable endpoint models may read" in llm.endpoint_key_missing(endpoint)


def test_a_group_s_tournament_builds_its_group_s_snapshot_from_its_workflow(lab, client):
    from django.utils import timezone

    from annotation.models import Assignment, HumanJudgement, JudgeRun
    from annotation.preferences.tournaments import launch_tournament
    from tests.annotation.admin.test_admin_workflow import next_url
    from tests.factories import WorkerFactory
    from tests.scoring_factories import create_tournament, verified_instance, with_responses

    with_responses(verified_instance(family=lab.family), "llava")
    tournament = launch_tournament(tournament=create_tournament(
        name="Vision walk", judgements_per_pair=1, group=lab.vision, families=[lab.family]))
    battle = tournament.battles.get()
    assignment = Assignment.objects.create(unit=battle.work_units.get(), worker=WorkerFactory(),
                                           status=Assignment.Status.SUBMITTED, lease_expires_at=timezone.now(),
                                           submitted_at=timezone.now())
    HumanJudgement.objects.create(battle=battle, worker=assignment.worker, assignment=assignment, shown_left="A",
                                  choice="A")
    JudgeRun.objects.create(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE, status=JudgeRun.Status.DONE)

    lab.client_of(lab.people[Role.RESEARCHER], client)
    built = client.post(next_url(tournament), {"action": "build_snapshot"}, follow=True)
    assert "is being built in the background" in built.content.decode()
    with scoping.every_group("the test reads the snapshot made"):
        snapshot = Snapshot.objects.get()
    assert (snapshot.group, list(snapshot.tournaments.all())) == (lab.vision, [tournament])


def test_an_owner_adds_a_member_by_user_name_without_reading_the_list_of_users(lab, client):
    from tests.annotation.admin.test_legacy_gold_items import as_shown

    get_user_model().objects.create_user("newcomer", password="pw")
    lab.client_of(lab.people[Role.OWNER], client)
    url = reverse("admin:annotation_researchgroup_change", args=[lab.vision.pk])
    shown = client.get(url)
    assert "newcomer" not in shown.content.decode()  # no list of every user
    posted = as_shown(shown)
    extra = int(posted["memberships-TOTAL_FORMS"]) - 1  # the blank row the page offers

    unknown = client.post(url, {**posted, f"memberships-{extra}-user": "nobody-here",
                                f"memberships-{extra}-role": Role.VIEWER})
    assert unknown.status_code == 200 and "No user is named “nobody-here”." in unknown.content.decode()
    added = client.post(url, {**posted, f"memberships-{extra}-user": "newcomer",
                              f"memberships-{extra}-role": Role.VIEWER})
    assert added.status_code == 302, added.context_data["errors"]
    assert Membership.objects.get(user__username="newcomer").group == lab.vision
