"""Every page the project serves keeps a research group's rows from every other group (issue 37).

The URL patterns are read from the URL configuration itself, the admin's included, so a page added
tomorrow is crawled tomorrow: each pattern's converters are filled with the ids of group A's rows,
and every role of group B (and a staff account in no group) GETs it. No answer may carry any of the
marker strings planted in A's rows, and none may be a server error. A pattern whose kwargs cannot be
filled must be listed in UNFILLED with the reason; a new one that is neither fails the test.
"""

import re
import uuid

import pytest
from auditlog.models import LogEntry
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import URLResolver, get_resolver
from django.urls.resolvers import RoutePattern
from django.utils import timezone

from annotation import teams
from annotation.datasets import snapshots
from annotation.models import (
    Assignment,
    Battle,
    Caption,
    DecisionChange,
    EndpointCall,
    HumanJudgement,
    JudgeCall,
    JudgeJudgement,
    JudgeRun,
    Membership,
    ModelEndpoint,
    ModelResponse,
    Reference,
    Rubric,
    Stage,
    StageConfig,
    Tournament,
    Verification,
    WorkerReliability,
    WorkUnit,
)
from mturk.models import AuditLog, Bonus, CrowdStudy, Hit, Submission
from tests.factories import FamilyFactory, WorkerFactory, launch
from tests.scoring_factories import verified_instance
from webhooks.models import Delivery, Endpoint

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
Role = Membership.Role

# Planted in every text of group A's rows; matched case-blind, so a title-cased or upper-cased
# rendering is caught too.
MARK = "zqxalphasecret"

# Patterns whose kwargs are not filled with A's ids, and why. Keyed by the route as the crawler
# prints it; a new pattern that is neither filled nor listed here fails the test.
UNFILLED = {
    "media/<path:path>": "images are shared by every group by design (docs/security.md); snapshots are "
                         "not stored under media",
}

# Models the admin registers that no group owns, directly or through a family, tournament or
# snapshot, and why: their change pages are crawled with a row tied to A where one exists, but none
# is required.
SHARED_MODELS = {
    "auth.group": "Django's permission groups, one per role, for all research groups",
    "auth.user": "accounts; a member's page shows no group's rows",
    "axes.accessattempt": "login throttling, shown to superusers only",
    "axes.accesslog": "login throttling, shown to superusers only",
    "axes.accessfailurelog": "login throttling, shown to superusers only",
    "authtoken.tokenproxy": "API tokens, shown to superusers only",
    "annotation.imageasset": "images are shared by every group",
    "annotation.researchgroup": "the groups themselves; owners manage their own",
    "tasks.job": "background jobs are shared by every group",
    "annotation.stagequalification": "qualification tests are per stage, shared by every group",
    "annotation.golditem": "qualification tests are per stage, shared by every group",
    "annotation.qualificationattempt": "qualification tests are per stage, shared by every group",
    "annotation.goldanswer": "qualification tests are per stage, shared by every group",
    "annotation.workerqualification": "qualification tests are per stage, shared by every group",
    "annotation.workerblock": "a blocked worker is blocked for every group",
}


class GroupA:
    """Group A's rows, one of each kind a page may show, every text carrying MARK."""

    def __init__(self, snapshot_folder):
        self.group = teams.create_group(name="Group A")
        self.user = get_user_model().objects.create_user("group-a-owner", password="pw")
        teams.add_member(group=self.group, user=self.user, role=Role.OWNER)
        self.family = FamilyFactory(name=f"{MARK} family", description=f"{MARK} description",
                                    seed_instruction=f"{MARK} seed instruction", group=self.group)
        self.stage_config = launch(self.family, Stage.CAPTION)
        self.worker = WorkerFactory()
        self.instance = verified_instance(family=self.family, instruction=f"{MARK} instruction",
                                          caption=[f"{MARK} caption"], reference_output=f"{MARK} reference output")
        self.reference = Reference.objects.create(
            instance=self.instance, caption=self.instance.current_caption, model="gpt-4",
            text=f"{MARK} reference", verdict=Reference.Verdict.CORRECT)
        self.decision_change = DecisionChange.objects.create(
            reference=self.reference, model="dawid_skene", before=Reference.Verdict.INCORRECT,
            after=Reference.Verdict.CORRECT, applied=False, note=f"{MARK} decision stands")
        self.unit = WorkUnit.objects.create(stage=Stage.VERIFICATION, key=f"{MARK}-unit", family=self.family,
                                            instance=self.instance, reference=self.reference)
        self.assignment = Assignment.objects.create(
            unit=self.unit, worker=self.worker, status=Assignment.Status.SUBMITTED,
            lease_expires_at=timezone.now(), submitted_at=timezone.now(), review_reason=f"{MARK} review reason")
        # The worker copied one caption onto two of A's instances: their page quotes copied text.
        for number in range(2):
            copied = verified_instance(family=self.family, instruction=f"{MARK} instruction {number}")
            unit = WorkUnit.objects.create(stage=Stage.CAPTION, key=f"{MARK}-caption-{number}", family=self.family,
                                           instance=copied)
            Caption.objects.create(instance=copied, texts=[f"{MARK} copied caption"], author=self.worker,
                                   assignment=Assignment.objects.create(
                                       unit=unit, worker=self.worker, status=Assignment.Status.SUBMITTED,
                                       lease_expires_at=timezone.now(), submitted_at=timezone.now()))
        self.verification = Verification.objects.create(
            reference=self.reference, worker=self.worker, assignment=self.assignment, is_correct=True,
            comment=f"{MARK} verification comment")
        self.responses = [ModelResponse.objects.create(instance=self.instance, model_name=f"{MARK}-model-{side}",
                                                       text=f"{MARK} response {side}") for side in "ab"]
        self.tournament = Tournament.objects.create(name=f"{MARK} tournament", group=self.group,
                                                    rubric=f"{MARK} rubric")
        self.tournament.families.set([self.family])
        Rubric.objects.create(tournament=self.tournament, family=self.family, text=f"{MARK} family rubric")
        self.battle = Battle.objects.create(tournament=self.tournament, instance=self.instance,
                                            response_a=self.responses[0], response_b=self.responses[1])
        self.human_judgement = HumanJudgement.objects.create(
            battle=self.battle, tournament=self.tournament, worker=self.worker, assignment=self.assignment,
            shown_left=HumanJudgement.ShownLeft.A, choice="left")
        self.judge_run = JudgeRun.objects.create(tournament=self.tournament, engine=f"{MARK}-judge",
                                                 status=JudgeRun.Status.DONE)
        self.judge_call = JudgeCall.objects.create(request_sha256="0" * 64, request={"prompt": f"{MARK} prompt"},
                                                   response={"text": f"{MARK} judge answer"}, run=self.judge_run)
        self.judge_judgement = JudgeJudgement.objects.create(
            run=self.judge_run, battle=self.battle, ordering=JudgeJudgement.Ordering.AB, cot=f"{MARK} reasoning",
            winner=JudgeJudgement.Winner.A, call=self.judge_call)
        self.model_endpoint = ModelEndpoint.objects.create(
            tournament=self.tournament, model_name=f"{MARK}-endpoint-model", base_url="https://models.example.org/v1",
            model=f"{MARK}-model", api_key_env="ALPHA_KEY")
        self.endpoint_call = EndpointCall.objects.create(endpoint=self.model_endpoint, instance=self.instance,
                                                         response={"text": f"{MARK} endpoint answer"})
        self.reliability = WorkerReliability.objects.create(
            worker=self.worker, stage=Stage.VERIFICATION, family=self.family, model="dawid_skene",
            reliability=0.9, answers=1, fitted_at=timezone.now())
        self.study = CrowdStudy.objects.create(platform="prolific", stage=Stage.VERIFICATION, family=self.family,
                                               name=f"{MARK} study", title=f"{MARK} study title")
        self.hit = Hit.objects.create(study=self.study, unit=self.unit, environment="sandbox", max_assignments=1,
                                      reward_usd="0.10")
        self.submission = Submission.objects.create(study=self.study, worker=self.worker, hit=self.hit,
                                                    feedback=f"{MARK} feedback")
        self.bonus = Bonus.objects.create(submission=self.submission, amount_usd="1.00", reason=f"{MARK} bonus")
        self.audit_log = AuditLog.objects.create(action="bonus", platform="prolific", study=self.study,
                                                 worker=self.worker, submission=self.submission, ok=True,
                                                 request={"note": f"{MARK} request"})
        self.webhook = Endpoint.objects.create(url=f"https://{MARK}.example.org/hook", family=self.family,
                                               events=["stage.launched"], description=f"{MARK} webhook")
        self.delivery = Delivery.objects.create(endpoint=self.webhook, event_id=uuid.uuid4(),
                                                event="stage.launched", payload={"family": f"{MARK} family"},
                                                next_attempt_at=timezone.now())
        self.snapshot = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(
            group=self.group, tournaments=[self.tournament], note=f"{MARK} snapshot note", background=False))
        self.snapshot_file = next(entry["name"] for entry in self.snapshot.files if entry.get("rows"))

    def row_of(self, model):
        """A's row of `model`, or None where A has none (SHARED_MODELS says why that is fine)."""
        rows = {row._meta.concrete_model: row for row in (
            self.family, self.instance, self.reference, self.decision_change, self.verification, self.unit,
            self.assignment,
            self.tournament, self.battle, self.human_judgement, self.judge_run, self.judge_call,
            self.judge_judgement, self.endpoint_call, self.reliability, self.study, self.hit, self.submission,
            self.bonus, self.audit_log, self.webhook, self.delivery, self.snapshot, self.worker, self.group,
            self.user)}
        rows.update({ModelResponse: self.responses[0], StageConfig: self.stage_config,
                     LogEntry: LogEntry.objects.get_for_object(self.family).first()})
        return rows.get(model._meta.concrete_model)


HEALTH_ROUTE = "health/"

# --- reading the URL configuration ---------------------------------------------------------------

def _patterns(resolvers, prefix=()):
    """(pieces of the pattern, from the root) of every URL pattern the project serves."""
    for pattern in resolvers:
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern.url_patterns, (*prefix, pattern.pattern))
        else:
            yield (*prefix, pattern.pattern)


def _route(pieces):
    return "".join(str(piece) for piece in pieces)


def _kwarg_names(piece):
    return list(piece.converters) if isinstance(piece, RoutePattern) else list(piece.regex.groupindex)


_ROUTE_KWARG = re.compile(r"<(?:[^>:]+:)?([^>]+)>")
_REGEX_KWARG = re.compile(r"\(\?P<(\w+)>[^)]*\)")


def _path(pieces, values):
    """The URL of `pieces` with each kwarg replaced by its value."""
    parts = []
    for piece in pieces:
        text = str(piece)
        if isinstance(piece, RoutePattern):
            parts.append(_ROUTE_KWARG.sub(lambda match: str(values[match.group(1)]), text))
        else:
            text = _REGEX_KWARG.sub(lambda match: str(values[match.group(1)]), text)
            parts.append(text.removeprefix("^").removesuffix("$").replace("/?", "/").replace("\\.", "."))
    return "/" + "".join(parts)


def _admin_model(route):
    """The model of an admin page's route (admin/<app_label>/<model_name>/...), or None."""
    match = re.match(r"admin/(\w+)/(\w+)/", route)
    if match is None:
        return None
    try:
        model = apps.get_model(*match.groups())
    except LookupError:
        return None
    return model if model in admin.site._registry else None


# Each API resource's route, and the model its <pk> names.
API_MODELS = {"families": "annotation.InstructionFamily", "instances": "annotation.Instance",
              "tournaments": "annotation.Tournament", "human-judgements": "annotation.HumanJudgement",
              "judge-judgements": "annotation.JudgeJudgement", "webhook-endpoints": "webhooks.Endpoint",
              "webhook-deliveries": "webhooks.Delivery"}


def _values(route, names, a):
    """The kwargs of `route` filled with A's ids, or None when one cannot be."""
    model = _admin_model(route)
    api = re.match(r"api/\^([\w-]+)", route)
    fixed = {
        "family_id": a.family.pk, "instance_id": a.instance.pk, "worker_id": a.worker.pk,
        "tournament_id": a.tournament.pk, "unit_id": a.unit.pk, "kind": "single_image", "judge": "crowd",
        "stage": Stage.VERIFICATION, "format": "json", "version": a.snapshot.version, "name": a.snapshot_file,
        "app_label": "annotation", "id": a.user.pk,
        "content_type_id": ContentType.objects.get_for_model(a.family).pk,
        "url": f"annotation/instructionfamily/{a.family.pk}",
    }
    values = {}
    for name in names:
        if name in fixed and not (name == "object_id" or (name == "pk" and api)):
            values[name] = fixed[name]
        elif name == "object_id" and route.startswith("admin/r/"):
            values[name] = a.family.pk
        elif name == "object_id" and model is not None:
            row = a.row_of(model)
            if row is None:
                return None
            values[name] = row.pk
        elif name == "pk" and api and api.group(1) in API_MODELS:
            values[name] = a.row_of(apps.get_model(API_MODELS[api.group(1)])).pk
        else:
            return None
    if "format" in values and route.endswith("<drf_format_suffix:format>"):
        values["format"] = ".json"
    return values


# --- the crawl -----------------------------------------------------------------------------------

@pytest.fixture
def group_a(snapshot_folder, fresh_cache):
    return GroupA(snapshot_folder)


def _visitor(role):
    """A member of group B with `role`, or (role None) a staff account in no group holding every
    model permission a researcher has."""
    user_model = get_user_model()
    if role is None:
        visitor = user_model.objects.create_user("staff-outside-groups", password="pw", is_staff=True)
        visitor.user_permissions.set(teams.role_permissions(Role.RESEARCHER))
        return user_model.objects.get(pk=visitor.pk)
    group_b = teams.create_group(name="Group B")
    visitor = user_model.objects.create_user(f"group-b-{role}", password="pw")
    teams.add_member(group=group_b, user=visitor, role=role)
    # B has rows of its own, so its pages are not empty for a reason of their own.
    FamilyFactory(name="Group B family", group=group_b)
    return user_model.objects.get(pk=visitor.pk)


def _crawl(client, a):
    """[(url, what went wrong)] over every pattern, and the routes neither filled nor listed."""
    problems, unlisted = [], []
    for pieces in _patterns(get_resolver().url_patterns):
        route = _route(pieces)
        names = [name for piece in pieces for name in _kwarg_names(piece)]
        values = _values(route, names, a)
        if values is None:
            if route not in UNFILLED and not (_admin_model(route) and _admin_model(route)._meta.label_lower
                                              in SHARED_MODELS):
                unlisted.append(route)
            continue
        url = _path(pieces, values)
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        # /health/ says 503 when a component it checks is down (no Celery worker answers in a test run):
        # the answer it exists to give, not a fault; its body is still searched for A's data below.
        if response.status_code >= 500 and not (route == HEALTH_ROUTE and response.status_code == 503):
            problems.append((url, f"answered {response.status_code}"))
        elif MARK.encode() in body.lower():
            problems.append((url, f"answered {response.status_code} with group A's data"))
    return problems, unlisted


@pytest.mark.parametrize("role", [*Role.values, None], ids=[*Role.values, "staff-outside-groups"])
def test_no_page_shows_group_a_s_rows_to_another_group_or_to_staff_outside_groups(group_a, role):
    client = Client(raise_request_exception=False)
    client.force_login(_visitor(role))
    problems, unlisted = _crawl(client, group_a)
    assert not unlisted, f"URL patterns neither filled nor listed in UNFILLED: {unlisted}"
    assert not problems, "\n".join(f"{url}: {what}" for url, what in problems)


def test_the_crawl_sees_group_a_s_rows_as_a_member_of_group_a(group_a):
    """The crawl is no test unless the marker shows where it belongs: A's own owner finds it on the
    pages of A's family, sheet, snapshot and webhook."""
    client = Client(raise_request_exception=False)
    client.force_login(group_a.user)
    problems, _ = _crawl(client, group_a)
    leaked = {url for url, what in problems if "group A's data" in what}
    for expected in (f"/admin/annotation/instructionfamily/{group_a.family.pk}/change/",
                     f"/admin/annotation/instructionfamily/{group_a.family.pk}/sheet/single_image.csv",
                     f"/api/snapshots/{group_a.snapshot.version}/files/{group_a.snapshot_file}/",
                     f"/admin/webhooks/endpoint/{group_a.webhook.pk}/change/",
                     f"/admin/annotation/worker/{group_a.worker.pk}/page/",
                     f"/admin/auditlog/logentry/{group_a.row_of(LogEntry).pk}/change/"):
        assert expected in leaked
