"""Research groups own families, tournaments and snapshots: a member sees only their groups' rows and
changes them as their role allows, in the admin, the dashboard, the API and snapshot downloads alike;
staff outside groups work as before groups existed."""

import csv
import datetime
import io
import itertools

import pytest
from auditlog.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import teams
from annotation.datasets import snapshots
from annotation.exceptions import AnnotationError
from annotation.models import (
    Assignment,
    Caption,
    Instance,
    InstructionFamily,
    Membership,
    Reference,
    ResearchGroup,
    Snapshot,
    Stage,
    StageConfig,
    Tournament,
    WorkUnit,
)
from annotation.preferences.eligible import eligible_instances
from mturk import selectors
from mturk.models import CrowdStudy
from mturk.services.publishing import units_to_publish
from tests import published_data
from tests.factories import FamilyFactory, InstanceFactory, ReferenceFactory, WorkerFactory, launch
from tests.scoring_factories import verified_instance

pytestmark = pytest.mark.django_db
Role = Membership.Role


@pytest.fixture(autouse=True)
def _fresh_cache_and_a_snapshot_folder(fresh_cache, snapshot_folder):
    return None


class Lab:
    """Two groups, a member of each role in the first and a researcher in the second."""

    def __init__(self):
        self.vision = teams.create_group(name="Vision lab")
        self.speech = teams.create_group(name="Speech lab")
        self.people = {}
        for role in Role.values:
            self.people[role] = self._member(f"vision-{role}", self.vision, role)
        self.outsider = self._member("speech-researcher", self.speech, Role.RESEARCHER)
        self.family = FamilyFactory(name="Recipes", group=self.vision)
        self.other_family = FamilyFactory(name="Street signs", group=self.speech)
        self.tournament = Tournament.objects.create(name="Vision models", group=self.vision)
        self.other_tournament = Tournament.objects.create(name="Speech models", group=self.speech)

    @staticmethod
    def _member(username, group, role):
        user = get_user_model().objects.create_user(username, password="pw")
        teams.add_member(group=group, user=user, role=role)
        return get_user_model().objects.get(pk=user.pk)

    def client_of(self, user, client):
        client.force_login(user)
        return client


@pytest.fixture
def lab():
    return Lab()


def _families_listed(client):
    page = client.get(reverse("admin:annotation_instructionfamily_changelist")).content.decode()
    return {name for name in ("Recipes", "Street signs", "Unowned family") if name in page}


# --- admin ---------------------------------------------------------------------------------------

def test_a_member_of_another_group_neither_lists_nor_opens_a_family(lab, client):
    lab.client_of(lab.outsider, client)
    assert _families_listed(client) == {"Street signs"}
    page = client.get(reverse("admin:annotation_instructionfamily_change", args=[lab.family.pk]), follow=True)
    assert "Recipes" not in page.content.decode().split("<main", 1)[-1].replace("Recipes”", "")  # no form
    assert "doesn’t exist" in page.content.decode()
    workflow = client.get(reverse("admin:annotation_instructionfamily_workflow", args=[lab.family.pk]))
    assert workflow.status_code == 404


@pytest.mark.parametrize("role", [Role.VIEWER, Role.REVIEWER])
def test_viewers_and_reviewers_see_the_family_but_cannot_change_or_launch_it(lab, client, role):
    lab.client_of(lab.people[role], client)
    assert _families_listed(client) == {"Recipes"}
    change = client.get(reverse("admin:annotation_instructionfamily_change", args=[lab.family.pk]))
    assert change.status_code == 200 and 'name="_save"' not in change.content.decode()
    posted = client.post(reverse("admin:annotation_instructionfamily_change", args=[lab.family.pk]),
                         {"name": "Renamed"})
    assert posted.status_code == 403
    client.post(reverse("admin:annotation_instructionfamily_workflow_next", args=[lab.family.pk]),
                {"action": "launch_instruction_generation"})
    assert not StageConfig.objects.filter(family=lab.family, launched_at__isnull=False).exists()


@pytest.mark.parametrize("role", [Role.OWNER, Role.RESEARCHER])
def test_owners_and_researchers_launch_their_group_s_family(lab, client, role):
    lab.client_of(lab.people[role], client)
    page = client.post(reverse("admin:annotation_instructionfamily_workflow_next", args=[lab.family.pk]),
                       {"action": "launch_instruction_generation"}, follow=True)
    assert "Instruction generation launched" in page.content.decode()
    assert StageConfig.objects.get(family=lab.family, stage=Stage.INSTRUCTION_GENERATION).launched_at


def test_an_action_on_the_list_reaches_only_rows_the_member_may_change(lab, client):
    # A researcher of the speech lab who is only a viewer in the vision lab.
    teams.add_member(group=lab.vision, user=lab.outsider, role=Role.VIEWER)
    lab.client_of(lab.outsider, client)
    assert _families_listed(client) == {"Recipes", "Street signs"}
    client.post(reverse("admin:annotation_instructionfamily_changelist"),
                {"action": "launch_instruction_generation",
                 "_selected_action": [lab.family.pk, lab.other_family.pk]})
    launched = set(StageConfig.objects.filter(launched_at__isnull=False).values_list("family__name", flat=True))
    assert launched == {"Street signs"}


def test_a_new_family_of_a_member_belongs_to_one_of_their_groups(lab, client):
    lab.client_of(lab.people[Role.RESEARCHER], client)
    form = client.get(reverse("admin:annotation_instructionfamily_add")).content.decode()
    assert "Vision lab" in form and "Speech lab" not in form


def test_only_owners_manage_their_group_s_members(lab, client):
    lab.client_of(lab.people[Role.OWNER], client)
    assert client.get(reverse("admin:annotation_researchgroup_change", args=[lab.vision.pk])).status_code == 200
    assert client.get(reverse("admin:annotation_researchgroup_change", args=[lab.speech.pk]),
                      follow=True).redirect_chain
    lab.client_of(lab.people[Role.RESEARCHER], client)
    listed = client.get(reverse("admin:annotation_researchgroup_changelist")).content.decode()
    assert "Vision lab" not in listed.split('id="result_list"', 1)[-1]


def test_staff_outside_groups_see_only_what_no_group_owns(lab, client):
    FamilyFactory(name="Unowned family")
    staff = get_user_model().objects.create_user("legacy", password="pw", is_staff=True)
    staff.user_permissions.set(lab.people[Role.RESEARCHER].groups.get().permissions.all())
    client.force_login(staff)
    assert _families_listed(client) == {"Unowned family"}


# --- dashboard -----------------------------------------------------------------------------------

def test_the_dashboard_lists_and_opens_only_the_group_s_tournaments(lab, client):
    lab.client_of(lab.people[Role.VIEWER], client)
    index = client.get(reverse("dashboard:index")).content.decode()
    assert "Vision models" in index and "Speech models" not in index
    assert client.get(reverse("dashboard:leaderboard", args=[lab.other_tournament.pk])).status_code == 404
    assert client.get(reverse("dashboard:leaderboard", args=[lab.tournament.pk])).status_code == 200


# --- API and downloads ---------------------------------------------------------------------------

def _api(user):
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_the_api_lists_and_opens_only_the_group_s_rows(lab):
    api = _api(lab.outsider)
    names = [row["name"] for row in api.get("/api/families/").json()["results"]]
    assert names == ["Street signs"]
    assert api.get(f"/api/families/{lab.family.pk}/").status_code == 404
    assert api.get(f"/api/tournaments/{lab.tournament.pk}/").status_code == 404
    assert [row["name"] for row in api.get("/api/tournaments/").json()["results"]] == ["Speech models"]


def test_a_group_s_snapshot_holds_its_families_only_and_is_downloaded_by_its_members_only(lab):
    mine = verified_instance(family=lab.family, instruction="How many eggs go in?")
    theirs = verified_instance(family=lab.other_family, instruction="What does the sign forbid?")
    for instance in (mine, theirs):
        ReferenceFactory(instance=instance, verdict=Reference.Verdict.CORRECT)
    api = _api(lab.people[Role.RESEARCHER])
    requested = api.post("/api/snapshots/", {"note": "vision only"}, format="json")
    assert requested.status_code == 202
    snapshot = Snapshot.objects.get(version=requested.json()["version"])
    assert snapshot.group == lab.vision
    built = snapshots.build_snapshot(snapshot=snapshot)
    assert list(built.instance_digests) == [str(mine.pk)]
    assert list(built.manifest["counts"]["families"]) == ["Recipes"]
    name = next(entry["name"] for entry in built.files if entry.get("rows"))
    url = f"/api/snapshots/{built.version}/files/{name}/"
    got = api.get(url)
    assert got.status_code == 200, got.content
    assert _api(lab.people[Role.VIEWER]).get(url).status_code == 200
    assert _api(lab.outsider).get(url).status_code == 404
    assert _api(lab.outsider).get("/api/snapshots/").json()["results"] == []


def test_a_snapshot_may_not_take_another_group_s_tournament(lab):
    with pytest.raises(AnnotationError, match="not a tournament of Vision lab"):
        snapshots.request_snapshot(group=lab.vision, tournaments=[lab.other_tournament], background=False)
    refused = _api(lab.people[Role.RESEARCHER]).post(
        "/api/snapshots/", {"tournaments": [lab.other_tournament.pk]}, format="json")
    assert refused.status_code == 400
    assert _api(lab.people[Role.VIEWER]).post("/api/snapshots/", {}, format="json").status_code == 403


# --- the command ---------------------------------------------------------------------------------

def test_the_command_makes_a_group_and_adds_a_member_with_a_role(capsys):
    user = get_user_model().objects.create_user("ana", password="pw")
    call_command("research_group", "create", "Robotics")
    call_command("research_group", "add", "Robotics", "ana", "--role", "reviewer")
    call_command("research_group", "list")
    out = capsys.readouterr().out
    assert "Robotics: ana (reviewer)" in out
    user = get_user_model().objects.get(pk=user.pk)
    assert user.is_staff and user.has_perm("annotation.change_answer") and not user.has_perm(
        "annotation.change_instructionfamily")
    assert ResearchGroup.objects.get(name="Robotics").memberships.get().role == Role.REVIEWER
    with pytest.raises(CommandError, match="No user is called “nobody”"):
        call_command("research_group", "add", "Robotics", "nobody")
    with pytest.raises(CommandError, match="exists already"):
        call_command("research_group", "create", "Robotics")


# --- sheets, the predictions page and webhooks (issue 37) ----------------------------------------

def _published(family, instruction="What does the sign say?"):
    instance = verified_instance(family=family, instruction=instruction)
    instance.references.create(caption=instance.current_caption, model="gpt-4", text="It says stop.",
                               verdict="correct")
    return instance


def _sheet(client, family):
    return client.get(reverse("admin:annotation_instructionfamily_sheet", args=[family.pk, "single_image"]))


@pytest.mark.parametrize("role", Role.values)
def test_another_group_s_family_sheet_does_not_download(lab, role):
    _published(lab.family, "What is written on the vision lab's sign?")
    client = Client()
    speech_member = get_user_model().objects.create_user(f"speech-lab-{role}", password="pw")
    teams.add_member(group=lab.speech, user=speech_member, role=role)
    lab.client_of(speech_member, client)
    assert _sheet(client, lab.family).status_code == 404

    lab.client_of(lab.people[role], client)
    mine = _sheet(client, lab.family)
    assert mine.status_code == 200 and "vision lab's sign" in mine.content.decode()
    lab.client_of(get_user_model().objects.create_superuser("lead", password="pw"), client)
    assert _sheet(client, lab.family).status_code == 200


def test_the_import_predictions_page_lists_only_the_user_s_groups_families(lab, client):
    _published(lab.family)
    _published(lab.other_family)
    lab.client_of(lab.outsider, client)
    page = client.get(reverse("admin:annotation_modelresponse_import")).content.decode()
    assert "Street signs" in page and "Recipes" not in page
    assert reverse("admin:annotation_instructionfamily_sheet", args=[lab.family.pk, "single_image"]) not in page


def test_a_group_researcher_saves_a_webhook_endpoint_only_about_their_group_s_rows(lab, client):
    from mturk.models import CrowdStudy
    from webhooks.models import Endpoint

    lab.client_of(lab.people[Role.RESEARCHER], client)
    body = {"url": "https://hooks.example.org/vision", "events": ["stage.launched"], "active": "on"}
    refused = client.post(reverse("admin:webhooks_endpoint_add"), body)
    assert refused.status_code == 200 and "your group" in refused.content.decode()
    theirs = CrowdStudy.objects.create(platform="prolific", stage=Stage.CAPTION, family=lab.other_family,
                                       name="Speech study")
    for scope in ({"family": lab.other_family.pk}, {"tournament": lab.other_tournament.pk},
                  {"study": theirs.pk}):
        assert client.post(reverse("admin:webhooks_endpoint_add"), {**body, **scope}).status_code == 200
    assert not Endpoint.objects.exists()

    made = client.post(reverse("admin:webhooks_endpoint_add"), {**body, "family": lab.family.pk})
    assert made.status_code == 302 and Endpoint.objects.get().family == lab.family


# --- snapshots of no group (issue 37) ------------------------------------------------------------

def _built(requested):
    assert requested.status_code == 202, requested.content
    return snapshots.build_snapshot(snapshot=Snapshot.objects.get(version=requested.json()["version"]))


def _downloaded(api, snapshot):
    answers = [api.get(f"/api/snapshots/{snapshot.version}/files/{entry['name']}/")
               for entry in snapshot.files if entry["format"] == "csv"]
    assert answers and all(answer.status_code == 200 for answer in answers)
    return b"".join(b"".join(answer.streaming_content) for answer in answers).decode()


def test_a_snapshot_of_no_group_holds_only_what_no_group_owns_even_when_a_superuser_makes_it(lab):
    _published(lab.family, "How many eggs go in the vision lab's cake?")
    _published(FamilyFactory(name="Unowned family"), "What colour is the unowned bus?")
    lead = get_user_model().objects.create_superuser("lead", password="pw")
    built = _built(_api(lead).post("/api/snapshots/", {"note": "no group named"}, format="json"))
    assert built.group is None
    assert list(built.manifest["counts"]["families"]) == ["Unowned family"]

    viewer = get_user_model().objects.create_user("snapshot-viewer", password="pw", is_staff=True)
    viewer.user_permissions.set([Permission.objects.get(codename="view_snapshot")])
    files = _downloaded(_api(viewer), built)
    assert "unowned bus" in files and "vision lab's cake" not in files


def test_a_superuser_who_names_a_group_snapshots_that_group_which_staff_outside_it_do_not_see(lab):
    _published(lab.family, "How many eggs go in the vision lab's cake?")
    lead = get_user_model().objects.create_superuser("lead", password="pw")
    built = _built(_api(lead).post("/api/snapshots/", {"group": lab.vision.pk}, format="json"))
    assert "vision lab's cake" in _downloaded(_api(lead), built)

    viewer = get_user_model().objects.create_user("snapshot-viewer", password="pw", is_staff=True)
    viewer.user_permissions.set([Permission.objects.get(codename="view_snapshot")])
    assert _api(viewer).get(f"/api/snapshots/{built.version}/").status_code == 404
    client = Client()
    client.force_login(viewer)
    assert client.get(reverse("admin:annotation_snapshot_file", args=[built.pk, built.files[0]["name"]])
                      ).status_code == 404


def test_a_snapshot_of_no_group_built_before_the_rule_is_downloaded_by_superusers_only(lab):
    _published(FamilyFactory(name="Unowned family"), "What colour is the unowned bus?")
    lead = get_user_model().objects.create_superuser("lead", password="pw")
    built = _built(_api(lead).post("/api/snapshots/", {"note": "no group named"}, format="json"))
    assert built.manifest["research_group"] is None
    viewer = get_user_model().objects.create_user("snapshot-viewer", password="pw", is_staff=True)
    viewer.user_permissions.set([Permission.objects.get(codename="view_snapshot")])
    assert "unowned bus" in _downloaded(_api(viewer), built)

    # As an earlier version built it: no word of whose rows it holds, while a group existed.
    old_manifest = {key: value for key, value in built.manifest.items() if key != "research_group"}
    Snapshot.objects.filter(pk=built.pk).update(manifest=old_manifest)
    built.refresh_from_db()
    name = built.files[0]["name"]
    refused = _api(viewer).get(f"/api/snapshots/{built.version}/files/{name}/")
    assert refused.status_code == 403
    assert "only a superuser may download it" in refused.json()["detail"]
    client = Client()
    client.force_login(viewer)
    page = client.get(reverse("admin:annotation_snapshot_file", args=[built.pk, name]), follow=True)
    assert page.status_code == 200 and "Make a new snapshot" in page.content.decode()
    assert "unowned bus" in _downloaded(_api(lead), built)

    # Made before any group existed, it held nothing of a group's.
    ResearchGroup.objects.update(created_at=built.finished_at + datetime.timedelta(seconds=1))
    assert "unowned bus" in _downloaded(_api(viewer), built)


def test_a_snapshot_of_no_group_may_not_take_a_group_s_tournament(lab):
    with pytest.raises(AnnotationError, match="belongs to Vision lab"):
        snapshots.request_snapshot(tournaments=[lab.tournament], background=False)


# --- importing a published sheet (issue 37) ------------------------------------------------------

def _first_rows_of_the_multi_image_sheet(count=3):
    with open(published_data.MULTI, newline="", encoding="utf-8") as handle:
        rows = list(itertools.islice(csv.reader(handle), count + 1))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return SimpleUploadedFile("visit_bench_multi_images.csv", out.getvalue().encode(), "text/csv")


def _import(client, **fields):
    return client.post(reverse("admin:annotation_instructionfamily_import"),
                       {"sheet": _first_rows_of_the_multi_image_sheet(), **fields})


def test_importing_a_sheet_as_a_group_researcher_asks_for_the_group_and_the_families_are_its(lab, client):
    lab.client_of(lab.people[Role.RESEARCHER], client)
    form = client.get(reverse("admin:annotation_instructionfamily_import")).content.decode()
    assert "Vision lab" in form and "Speech lab" not in form

    assert "This field is required" in _import(client).content.decode()
    assert _import(client, group=lab.speech.pk).status_code == 200
    assert not Instance.objects.exists()

    assert _import(client, group=lab.vision.pk).status_code == 302
    imported = InstructionFamily.objects.filter(source=InstructionFamily.Source.REFORMATTED)
    assert imported.exists() and set(imported.values_list("group", flat=True)) == {lab.vision.pk}
    listed = client.get(reverse("admin:annotation_instructionfamily_changelist")).content.decode()
    assert all(family.name in listed for family in imported)


def test_a_sheet_a_superuser_imports_naming_no_group_makes_families_of_no_group(lab, client):
    client.force_login(get_user_model().objects.create_superuser("lead", password="pw"))
    assert _import(client).status_code == 302
    assert not InstructionFamily.objects.filter(source=InstructionFamily.Source.REFORMATTED,
                                                group__isnull=False).exists()


def test_a_sheet_whose_family_another_group_owns_is_refused_whole(lab, client):
    lab.client_of(lab.people[Role.RESEARCHER], client)
    assert _import(client, group=lab.vision.pk).status_code == 302
    before = Instance.objects.count()
    lab.client_of(lab.outsider, client)
    refused = _import(client, group=lab.speech.pk)
    assert refused.status_code == 200 and "in another research group" in refused.content.decode()
    assert Instance.objects.count() == before


# --- what a tournament draws on (issue 37) --------------------------------------------------------

def test_a_tournament_naming_no_family_draws_on_its_group_s_families_only(lab):
    mine = verified_instance(family=lab.family)
    verified_instance(family=lab.other_family)
    unowned = verified_instance(family=FamilyFactory(name="Unowned family"))
    assert eligible_instances(lab.tournament) == [mine]
    assert eligible_instances(Tournament.objects.create(name="Legacy models")) == [unowned]


def test_the_family_workflow_page_names_only_tournaments_of_the_family_s_group(lab, client):
    lab.client_of(lab.people[Role.RESEARCHER], client)
    page = client.get(reverse("admin:annotation_instructionfamily_workflow", args=[lab.family.pk])).content.decode()
    assert "Vision models" in page and "Speech models" not in page


# --- Table 2 "All families" (issue 37) -------------------------------------------------------------

def _rated(family, count):
    """`count` model-written references of `family` verification decided correct."""
    for n in range(count):
        _published(family, f"What does sign {n} of {family.name} say?")


@pytest.fixture
def rated_in_each_group(lab):
    """Table 2 rates 3 references of the vision lab, 1 of the speech lab and 2 of no group."""
    _rated(lab.family, 3)
    _rated(lab.other_family, 1)
    _rated(FamilyFactory(name="Unowned family"), 2)
    return lab


def _table2_references(client, **query):
    page = client.get(reverse("admin:annotation_instructionfamily_table2"), query)
    assert page.status_code == 200
    overall, single, multi = dict(page.context["rows"])["References rated (n)"]
    return int(overall)


@pytest.mark.parametrize("role", Role.values)
def test_table2_of_all_families_counts_only_the_member_s_groups_references(rated_in_each_group, client, role):
    lab = rated_in_each_group
    lab.client_of(lab.people[role], client)
    assert _table2_references(client) == 3
    lab.client_of(lab.outsider, client)
    assert _table2_references(client) == 1


def test_table2_of_all_families_counts_no_group_s_references_for_staff_outside_groups_and_all_for_a_superuser(
        rated_in_each_group, client):
    staff = get_user_model().objects.create_user("legacy", password="pw", is_staff=True)
    staff.user_permissions.set([Permission.objects.get(codename="view_instructionfamily")])
    client.force_login(staff)
    assert _table2_references(client) == 2
    assert client.get(reverse("admin:annotation_instructionfamily_table2"),
                      {"family": rated_in_each_group.family.pk}).status_code == 404
    client.force_login(get_user_model().objects.create_superuser("lead", password="pw"))
    assert _table2_references(client) == 6


def test_a_snapshot_s_table2_counts_its_group_s_references_and_one_of_no_group_those_of_no_group(
        rated_in_each_group):
    lab = rated_in_each_group
    vision = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(group=lab.vision, background=False))
    speech = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(group=lab.speech, background=False))
    unowned = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False))
    assert [built.manifest["table2"]["overall"]["references"] for built in (vision, speech, unowned)] == [3, 1, 2]


# --- what a crowd study draws on (issue 37) --------------------------------------------------------

def _open_caption_unit(family):
    launch(family, Stage.CAPTION)
    return WorkUnit.objects.create(stage=Stage.CAPTION, key=f"caption-{family.pk}", family=family)


def test_a_study_publishes_its_family_s_work_and_one_naming_no_family_only_the_work_of_no_group(lab):
    mine, theirs = _open_caption_unit(lab.family), _open_caption_unit(lab.other_family)
    unowned = _open_caption_unit(FamilyFactory(name="Unowned family"))
    of_recipes = CrowdStudy.objects.create(platform="mturk", stage=Stage.CAPTION, family=lab.family, name="Recipes")
    of_no_family = CrowdStudy.objects.create(platform="mturk", stage=Stage.CAPTION, name="Every family")
    assert list(units_to_publish(of_recipes)) == [mine]
    assert list(units_to_publish(of_no_family)) == [unowned]
    assert theirs.pk not in units_to_publish(of_no_family).values_list("pk", flat=True)


def test_a_participant_of_a_study_naming_no_family_is_given_only_the_work_of_no_group(lab):
    from annotation.crowdwork.next_step import Step
    from mturk.participants import next_step_in_study

    _open_caption_unit(lab.family)
    _open_caption_unit(lab.other_family)
    unowned = _open_caption_unit(FamilyFactory(name="Unowned family"))
    study = CrowdStudy.objects.create(platform="prolific", stage=Stage.CAPTION, name="Every family")
    given = []
    for number in range(3):
        participant = WorkerFactory(platform="prolific")
        step = next_step_in_study(worker=participant, study=study, platform_session_id=f"session-{number}")
        given.append(step.assignment.unit if step.kind == Step.LEASE else step.kind)
    # One unit of no group, taken by the first; the others find nothing, never another group's unit.
    assert given == [unowned, Step.NOTHING, Step.NOTHING]


def test_a_study_s_pay_plan_reads_only_the_tournaments_and_overlaps_its_families_draw_on(lab):
    launch(lab.other_family, Stage.CAPTION, overlap=5)
    launch(FamilyFactory(name="Unowned family"), Stage.CAPTION, overlap=2)
    of_no_family = CrowdStudy.objects.create(platform="mturk", stage=Stage.CAPTION, name="Every family",
                                             estimated_seconds=60)
    assert selectors.plan_for_study(of_no_family, tasks=10).assignments_per_task == 2

    # Both labs' tournaments name no family; the speech lab's is the newer.
    pairwise = {"platform": "prolific", "stage": Stage.PAIRWISE, "estimated_seconds": 60}
    recipes = CrowdStudy.objects.create(family=lab.family, name="Recipes pairwise", **pairwise)
    assert "tournament “Vision models”" in selectors.plan_for_study(recipes, tasks=1).overlap_source
    of_no_group = selectors.plan_for_study(CrowdStudy.objects.create(name="Pairwise", **pairwise), tasks=1)
    assert "Speech models" not in of_no_group.overlap_source and "Vision models" not in of_no_group.overlap_source


def test_a_member_s_new_study_names_a_family_of_their_group(lab, client):
    lab.client_of(lab.people[Role.OWNER], client)
    added = client.post(reverse("admin:mturk_crowdstudy_add") + "?platform=local", {
        "platform": "local", "stage": Stage.CAPTION, "name": "Every family", "reward_usd": "0.10",
        "target_hourly_wage_usd": "18.00", "assignment_duration_minutes": 60, "lifetime_hours": 72,
        "auto_approval_days": 0, "frame_height": 0, "min_approval_rate": 0, "min_approved_hits": 0,
        "places_published": 0})
    assert added.status_code == 200 and list(added.context["adminform"].form.errors) == ["family"]
    assert not CrowdStudy.objects.exists()
    form = client.get(reverse("admin:mturk_crowdstudy_add") + "?platform=local").content.decode()
    assert "Recipes" in form and "Street signs" not in form


# --- the worker page (issue 37) ------------------------------------------------------------------

def _captioned(worker, family, text, *, seconds):
    instance = InstanceFactory(family=family, status=Instance.Status.AWAITING_REFERENCE)
    unit = WorkUnit.objects.create(stage=Stage.CAPTION, key=f"caption:{instance.pk}", family=family,
                                   instance=instance)
    assignment = Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                           lease_expires_at=instance.created_at, submitted_at=instance.created_at,
                                           active_seconds=seconds)
    return Caption.objects.create(instance=instance, texts=[text], author=worker, assignment=assignment)


@pytest.fixture
def worked_for_both(lab):
    """A worker who copied one caption onto three of the vision lab's instances and another onto two
    of the speech lab's, and wrote one more text for each lab."""
    worker = WorkerFactory()
    for _ in range(3):
        _captioned(worker, lab.family, "Soup simmers in the vision lab's pot.", seconds=30)
    for _ in range(2):
        _captioned(worker, lab.other_family, "A stop sign at the speech lab's corner.", seconds=90)
    _captioned(worker, lab.family, "Written once for each lab.", seconds=30)
    _captioned(worker, lab.other_family, "Written once for each lab.", seconds=90)
    return worker


def _worker_page(client, worker):
    page = client.get(reverse("admin:annotation_worker_page", args=[worker.pk]))
    assert page.status_code == 200
    return page.context["report"], page.content.decode()


@pytest.mark.parametrize("role", Role.values)
def test_the_worker_page_counts_and_quotes_only_the_work_done_for_the_member_s_group(lab, worked_for_both, client,
                                                                                   role):
    lab.client_of(lab.people[role], client)
    report, page = _worker_page(client, worked_for_both)
    assert [(row.stage, row.submitted, row.median_seconds) for row in report.stages] == [(Stage.CAPTION, 4, 30)]
    assert [example for flag in report.flags for example in flag.examples] == [
        ("Soup simmers in the vision lab's pot.", 3)]
    assert "speech lab" not in page and "Written once" not in page


def test_the_worker_page_of_another_group_quotes_its_own_copies_only(lab, worked_for_both, client):
    lab.client_of(lab.outsider, client)
    report, page = _worker_page(client, worked_for_both)
    assert [(row.submitted, row.median_seconds) for row in report.stages] == [(3, 90)]
    assert [example for flag in report.flags for example in flag.examples] == [
        ("A stop sign at the speech lab's corner.", 2)]
    assert "vision lab" not in page


def test_the_worker_page_shows_a_superuser_every_group_s_work(lab, worked_for_both, client):
    client.force_login(get_user_model().objects.create_superuser("lead", password="pw"))
    report, _ = _worker_page(client, worked_for_both)
    assert [row.submitted for row in report.stages] == [7]
    assert {text for flag in report.flags for text, _ in flag.examples} == {
        "Soup simmers in the vision lab's pot.", "A stop sign at the speech lab's corner.",
        "Written once for each lab."}


# --- the audit trail (issue 37) --------------------------------------------------------------------

def _trail(client):
    page = client.get(reverse("admin:auditlog_logentry_changelist"))
    assert page.status_code == 200
    return {(entry.content_type.model, entry.object_repr) for entry in page.context["cl"].result_list}


def test_a_group_owner_reads_the_audit_trail_of_their_group_s_rows_only(lab, client):
    speech_owner = lab._member("speech-owner", lab.speech, Role.OWNER)
    FamilyFactory(name="Unowned family")
    theirs = lab.other_family.stage_configs.create(stage=Stage.CAPTION)
    lab.client_of(lab.people[Role.OWNER], client)
    trail = _trail(client)
    assert {("instructionfamily", "Recipes"), ("tournament", "Vision models"), ("researchgroup", "Vision lab")} <= trail
    assert not {repr_ for _, repr_ in trail} & {"Street signs", "Speech models", "Speech lab", "Unowned family",
                                                 str(theirs)}
    assert "speech" not in " ".join(repr_.lower() for _, repr_ in trail)
    entry = LogEntry.objects.get_for_object(lab.other_family).first()
    assert client.get(reverse("admin:auditlog_logentry_change", args=[entry.pk])).status_code in (302, 404)

    lab.client_of(speech_owner, client)
    assert ("instructionfamily", "Street signs") in _trail(client) and not any(
        repr_ == "Recipes" for _, repr_ in _trail(client))


@pytest.mark.parametrize("role", [Role.RESEARCHER, Role.REVIEWER, Role.VIEWER])
def test_only_owners_read_the_group_s_audit_trail(lab, client, role):
    lab.client_of(lab.people[role], client)
    assert client.get(reverse("admin:auditlog_logentry_changelist")).status_code == 403


def test_a_superuser_reads_every_group_s_audit_trail(lab, client):
    client.force_login(get_user_model().objects.create_superuser("lead", password="pw"))
    assert {("instructionfamily", "Recipes"), ("instructionfamily", "Street signs")} <= _trail(client)
