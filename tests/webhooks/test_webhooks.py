"""Signed webhooks and e-mail notifications: deliveries against a loopback receiver, their
signature checked with the snippet of docs/webhooks.md, and each event where the pipeline emits it."""

import json
import re
import time
from decimal import Decimal

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from annotation.collection import captions, references
from annotation.crowdwork import queue, stages
from annotation.datasets import snapshots
from annotation.judging import runner
from annotation.judging.runner import create_judge_run, run_judge
from annotation.models import JudgeRun, Stage
from crowdbench.events import emit
from mturk.models import CrowdStudy, Submission
from mturk.services import reviewing, syncing
from tests.factories import (
    FamilyFactory,
    InstanceFactory,
    WorkerFactory,
    awaiting_reference,
    launch,
    submitted_in_study,
)
from tests.mturk_wire import make_researcher
from tests.openai_fake import completion
from tests.scoring_factories import create_tournament, verified_instance, with_responses
from tests.webhook_support import LOOPBACK, Receiver, deliver_due
from webhooks.models import Delivery, Endpoint
from webhooks.sending import attempt

pytestmark = pytest.mark.django_db

CAPTION = "A man in a red coat waves from the top of a parade float."


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture
def researchers(settings):
    settings.NOTIFY_EMAILS = ["lead@example.org", "second@example.org"]
    return settings.NOTIFY_EMAILS


def endpoint_for(receiver, *events, **scope):
    return Endpoint.objects.create(url=receiver.url, events=list(events), **scope)


def documented_verify():
    """The `verify` function of docs/webhooks.md, as a receiver would copy it."""
    text = (django_settings.BASE_DIR / "docs" / "webhooks.md").read_text()
    (snippet,) = [block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "def verify(" in block]
    namespace = {}
    exec(snippet, namespace)  # noqa: S102 - our own documentation, run as its readers will
    return namespace["verify"]


# --- sending ------------------------------------------------------------------------------------


def test_a_receiver_that_fails_twice_gets_the_event_on_the_third_attempt_after_the_backoff(settings):
    settings.WEBHOOK_RETRY_BASE_SECONDS, settings.WEBHOOK_ALLOWED_NETWORKS = 0.3, LOOPBACK
    receiver = Receiver(statuses=[500, 503])
    family = FamilyFactory()
    endpoint_for(receiver, "stage.launched", family=family)
    emit(event="stage.launched", scope=family, key="one", payload={"stage": "caption"})
    delivery = Delivery.objects.get()
    try:
        waits = []
        wait = attempt(delivery_id=delivery.pk)
        while wait is not None:
            waits.append(wait)
            # Asked again before its wait is over, it sends nothing and says how long is left.
            early = attempt(delivery_id=delivery.pk)
            assert early is not None and 0 < early <= wait
            time.sleep(early)
            wait = attempt(delivery_id=delivery.pk)
    finally:
        receiver.stop()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == (Delivery.Status.DELIVERED, 3, 200)
    assert delivery.last_error.startswith("Attempt 2: HTTP 503")
    assert waits == [0.3, 0.6]
    arrivals = [request.at for request in receiver.received]
    assert len(arrivals) == 3
    assert arrivals[1] - arrivals[0] >= 0.3 and arrivals[2] - arrivals[1] >= 0.6
    assert len({request.headers["X-Crowdbench-Event-Id"] for request in receiver.received}) == 1


def test_a_delivery_is_signed_as_the_documented_snippet_checks(receiver):
    verify = documented_verify()
    family = FamilyFactory(name="Contextual knowledge")
    endpoint = endpoint_for(receiver, "stage.launched", family=family)

    stages.launch_stage(family=family, stage=Stage.CAPTION)
    (delivery,) = deliver_due()

    assert delivery.status == Delivery.Status.DELIVERED
    (request,) = receiver.received
    header = request.headers["X-Crowdbench-Signature"]
    assert verify(endpoint.secret, request.body, header)
    assert not verify("another secret", request.body, header)
    assert not verify(endpoint.secret, request.body.replace(b"caption", b"verification"), header)
    timestamp = int(header.split(",")[0].removeprefix("t="))
    # The same signature presented an hour later is refused: a recorded delivery cannot be replayed.
    assert not verify(endpoint.secret, request.body, header.replace(f"t={timestamp}", f"t={timestamp - 3600}"))
    body = json.loads(request.body)
    assert body["id"] == request.headers["X-Crowdbench-Event-Id"] == str(delivery.event_id)
    assert request.headers["X-Crowdbench-Event"] == body["type"] == "stage.launched"
    assert body["scope"] == {"kind": "family", "id": family.pk, "name": "Contextual knowledge"}
    assert body["data"] == {"family": family.pk, "stage": "caption", "overlap": 1}


def test_the_same_event_emitted_twice_is_one_delivery_per_consumer(receiver, researchers):
    study = CrowdStudy.objects.create(platform="prolific", stage=Stage.CAPTION, name="Captions")
    endpoint_for(receiver, "study.completed", study=study)
    for _ in range(2):
        emit(event="study.completed", scope=study, key="done-once", payload={"study": study.pk})
    assert sorted(Delivery.objects.values_list("channel", flat=True)) == ["email", "webhook"]
    assert len(set(Delivery.objects.values_list("event_id", flat=True))) == 1


def test_a_launch_repeated_is_the_same_event(receiver):
    family = FamilyFactory()
    endpoint_for(receiver, "stage.launched", family=family)
    stages.launch_stage(family=family, stage=Stage.CAPTION)
    stages.launch_stage(family=family, stage=Stage.CAPTION, overlap=2)
    assert Delivery.objects.count() == 1


def test_an_endpoint_gets_only_its_scopes_events_and_the_events_it_chose(receiver):
    family, other = FamilyFactory(), FamilyFactory()
    mine = endpoint_for(receiver, "stage.launched", family=family)
    everything = endpoint_for(receiver, "stage.launched", "worker.paused")
    endpoint_for(receiver, "stage.completed", family=family)
    Endpoint.objects.create(url=receiver.url, events=["stage.launched"], family=family, active=False)

    stages.launch_stage(family=family, stage=Stage.CAPTION)
    stages.launch_stage(family=other, stage=Stage.CAPTION)

    assert sorted(Delivery.objects.values_list("endpoint", flat=True)) == sorted([mine.pk, everything.pk,
                                                                                  everything.pk])


def test_attempts_spent_fail_the_delivery_and_send_again_starts_over(settings, receiver):
    settings.WEBHOOK_MAX_ATTEMPTS, settings.WEBHOOK_RETRY_BASE_SECONDS = 2, 0.0
    receiver.statuses = [500, 500]
    family = FamilyFactory()
    endpoint_for(receiver, "stage.launched", family=family)
    stages.launch_stage(family=family, stage=Stage.CAPTION)
    deliver_due()
    (delivery,) = deliver_due()
    assert (delivery.status, delivery.attempts) == (Delivery.Status.FAILED, 2)
    assert deliver_due() == []

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("lead", password="pw"))
    response = client.post(reverse("admin:webhooks_delivery_changelist"),
                           {"action": "send_again", "_selected_action": [delivery.pk]}, follow=True)
    assert "1 delivery(ies) queued to be sent again" in response.content.decode()
    (delivery,) = deliver_due()
    assert (delivery.status, delivery.attempts) == (Delivery.Status.DELIVERED, 1)
    assert delivery.last_error.startswith("Attempt 2: HTTP 500")
    assert len(receiver.received) == 3


def test_a_receiver_that_cannot_be_reached_is_a_failed_attempt_with_its_reason(settings):
    settings.WEBHOOK_TIMEOUT_SECONDS, settings.WEBHOOK_ALLOWED_NETWORKS = 2, LOOPBACK
    gone = Receiver()
    gone.stop()
    family = FamilyFactory()
    Endpoint.objects.create(url=gone.url, events=["stage.launched"], family=family)
    stages.launch_stage(family=family, stage=Stage.CAPTION)
    (delivery,) = deliver_due()
    assert delivery.status == Delivery.Status.PENDING and delivery.attempts == 1
    assert "ConnectError" in delivery.last_error


# --- where each event is emitted ------------------------------------------------------------------


def _caption_everything(family):
    stages.create_work_units(family=family, stage=Stage.CAPTION)
    while True:
        annotator = WorkerFactory()
        assignment = queue.next_assignment(worker=annotator, stage=Stage.CAPTION)
        if assignment is None:
            return
        captions.submit_caption(assignment_id=assignment.pk, worker=annotator, texts=[CAPTION])


def test_the_last_caption_completes_the_stage_and_its_study_and_the_researchers_are_mailed(
        receiver, researchers, mailoutbox):
    family = FamilyFactory(name="Parades")
    launch(family, Stage.CAPTION)
    InstanceFactory(family=family)
    InstanceFactory(family=family)
    study = CrowdStudy.objects.create(platform="prolific", stage=Stage.CAPTION, family=family, name="Parade captions")
    CrowdStudy.objects.create(platform="prolific", stage=Stage.VERIFICATION, family=family, name="Not this one")
    endpoint_for(receiver, "stage.completed", "study.completed", family=family)

    stages.create_work_units(family=family, stage=Stage.CAPTION)
    annotator = WorkerFactory()
    first = queue.next_assignment(worker=annotator, stage=Stage.CAPTION)
    captions.submit_caption(assignment_id=first.pk, worker=annotator, texts=[CAPTION])
    assert not Delivery.objects.exists()
    _caption_everything(family)

    delivered = deliver_due()
    assert sorted((d.event, d.channel) for d in delivered) == [
        ("stage.completed", "webhook"), ("study.completed", "email"), ("study.completed", "webhook")]
    assert all(d.status == Delivery.Status.DELIVERED for d in delivered)
    completed = json.loads(next(r.body for r in receiver.received
                                if r.headers["X-Crowdbench-Event"] == "stage.completed"))
    assert completed["data"]["units_done"] == 2 and completed["data"]["stage"] == "caption"
    study_body = json.loads(next(r.body for r in receiver.received
                                 if r.headers["X-Crowdbench-Event"] == "study.completed"))
    assert study_body["scope"] == {"kind": "study", "id": study.pk, "name": str(study)}
    (mail,) = mailoutbox
    assert mail.subject == f"[crowdbench] Study complete: {study}"
    assert mail.to == researchers


def test_the_last_reference_of_a_family_says_its_references_are_ready(receiver):
    family = FamilyFactory()
    endpoint_for(receiver, "references.ready", family=family)
    first, second = awaiting_reference(family=family), awaiting_reference(family=family)
    references.add_manual_reference(instance=first, text="He waves to the crowd.", user=None)
    assert not Delivery.objects.exists()
    references.add_manual_reference(instance=second, text="She holds a flag.", user=None)
    (delivery,) = deliver_due()
    assert delivery.payload["data"] == {"family": family.pk, "references": 2, "awaiting_verification": 2}


def _one_battle_tournament():
    instance = verified_instance(caption=[CAPTION])
    with_responses(instance, "llava", "otter")
    return create_tournament(name="judged", include_reference=False)


def test_a_finished_judge_run_is_announced_to_its_tournament(receiver, judge_server, researchers, mailoutbox):
    judge_server.default = completion("Overall, Response A is better.")
    tournament = _one_battle_tournament()
    endpoint_for(receiver, "judge_run.finished", "judge_run.failed", tournament=tournament)
    run = run_judge(run=create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE, concurrency=1))
    assert run.status == JudgeRun.Status.DONE
    (delivery,) = deliver_due()
    assert delivery.event == "judge_run.finished"
    assert delivery.payload["data"]["run"] == run.pk and delivery.payload["data"]["status"] == "done"
    # Finishing is not one of the events mailed by default.
    assert mailoutbox == []


def test_a_failed_judge_run_is_announced_and_mailed(receiver, researchers, mailoutbox):
    tournament = _one_battle_tournament()
    endpoint_for(receiver, "judge_run.failed", tournament=tournament)
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    runner.record_job_status(run.pk, JudgeRun.Status.FAILED, "RateLimitError: quota exceeded")
    # A second report of the same failure is not a second event.
    runner.record_job_status(run.pk, JudgeRun.Status.FAILED, "RateLimitError: quota exceeded")
    delivered = deliver_due()
    assert sorted(d.channel for d in delivered) == ["email", "webhook"]
    (mail,) = mailoutbox
    assert mail.subject == f"[crowdbench] Judge run failed: {tournament}"
    assert "error: RateLimitError: quota exceeded" in mail.body


def test_a_built_snapshot_is_announced_to_its_tournaments_and_families(receiver, settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "snapshots": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}
    instance = verified_instance(caption=[CAPTION])
    instance.references.create(caption=instance.current_caption, text="r", model="gpt-4", verdict="correct")
    by_family = endpoint_for(receiver, "snapshot.built", family=instance.family)
    endpoint_for(receiver, "snapshot.built", family=FamilyFactory())
    snapshot = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False))
    (delivery,) = deliver_due()
    assert delivery.endpoint == by_family
    data = delivery.payload["data"]
    assert (data["version"], data["content_sha256"]) == (snapshot.version, snapshot.content_sha256)
    assert {"name", "rows", "sha256"} == set(data["files"][0])


def test_a_reward_and_a_bonus_paid_on_prolific_are_announced_once_each(receiver, prolific, settings):
    settings.PUBLIC_BASE_URL = "https://crowdbench.example.org"
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    study = CrowdStudy.objects.create(platform="prolific", stage=Stage.CAPTION, family=family, name="Paid",
                                      external_id="60f6acb180a7b59ac0621f9e", reward_usd=Decimal("0.75"))
    endpoint_for(receiver, "payment.made", family=family)
    worker = WorkerFactory(platform="prolific", external_id="60ffe5c8371090c7041d43f0")
    prolific.submissions["sub1"] = {"id": "sub1", "participant_id": worker.external_id, "study_id": study.external_id,
                                    "status": "AWAITING REVIEW", "started_at": "2026-11-20T10:00:00Z",
                                    "completed_at": "2026-11-20T10:04:00Z"}
    submitted_in_study(study, worker, key="p-1", platform_assignment_id="sub1")
    syncing.sync_study(study=study)
    researcher = make_researcher()
    reviewing.approve_submissions(submissions=[Submission.objects.get()], actor=researcher)
    bonus = reviewing.create_bonus(submission=Submission.objects.get(), amount="0.50", reason="Careful",
                                   actor=researcher)
    # Two clicks pay once (Prolific's set-up step, which pays nothing, is no payment either).
    reviewing.pay_bonus(bonus=bonus, actor=researcher)
    reviewing.pay_bonus(bonus=bonus, actor=researcher)

    delivered = deliver_due()
    assert sorted((d.payload["data"]["kind"], d.payload["data"]["amount_usd"]) for d in delivered) == [
        ("bonus", "0.50"), ("reward", "0.75")]
    assert all(d.payload["data"]["worker"] == worker.pseudonym for d in delivered)
    assert worker.external_id not in json.dumps([d.payload for d in delivered])


def test_e_mail_goes_through_smtp_settings_and_a_refused_connection_is_retried(settings, researchers):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    gone = Receiver()
    gone.stop()
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", gone.server.server_address[1], False
    settings.EMAIL_TIMEOUT = 2
    tournament = _one_battle_tournament()
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    runner.record_job_status(run.pk, JudgeRun.Status.FAILED, "boom")
    (delivery,) = deliver_due()
    assert (delivery.channel, delivery.status, delivery.attempts) == ("email", Delivery.Status.PENDING, 1)
    assert "ConnectionRefusedError" in delivery.last_error
