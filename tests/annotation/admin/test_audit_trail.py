"""The audit trail: what researchers launch, change, review and delete is written with who did it
and when, and each object's History page in the admin shows it; annotators' own answers add no
entry."""

import pytest
from auditlog.models import LogEntry
from django.contrib.auth.models import User
from django.urls import reverse

from annotation.crowdwork.review import reject_work
from annotation.models import Assignment, Stage, StageConfig, Tournament, WorkState
from tests.factories import FamilyFactory, WorkerFactory
from tests.review_support import make_reviewer
from tests.review_support import verified_on_mturk as _verified_on_mturk
from tests.scoring_factories import create_tournament

pytestmark = pytest.mark.django_db
REASON = "Every verification came in under two seconds, without the images opened."


def test_launching_a_stage_from_the_admin_is_written_with_the_researcher(admin_client):
    family = FamilyFactory(name="Contextual knowledge of events")
    admin_client.post(reverse("admin:annotation_instructionfamily_workflow_next", args=[family.pk]),
                      {"action": "launch_instruction_generation"}, follow=True)
    config = StageConfig.objects.get(family=family, stage=Stage.INSTRUCTION_GENERATION)
    entries = list(LogEntry.objects.get_for_object(config).order_by("timestamp"))
    assert entries[0].action == LogEntry.Action.CREATE
    assert {entry.actor for entry in entries} == {User.objects.get(username="admin")}
    assert entries[-1].changes_dict["launched_at"][0] == "None"



def test_a_family_s_history_page_lists_who_changed_what(admin_client):
    family = FamilyFactory(name="Recipes")
    family.target_instances = 40
    family.save()
    LogEntry.objects.filter(object_id=family.pk, content_type__model="instructionfamily").update(
        actor=User.objects.get(username="admin"))
    page = admin_client.get(reverse("admin:annotation_instructionfamily_history", args=[family.pk]))
    text = page.content.decode()
    assert page.status_code == 200
    assert "Audit log" in text and "target instances" in text.lower() and "40" in text and "admin" in text


def test_a_rejection_is_written_on_the_answer_with_its_reviewer_and_reason_and_shown_on_its_history(client, mturk):
    spammer = WorkerFactory(external_id="A1SPAMMER00000009")
    _study, leases = _verified_on_mturk(mturk, spammer, count=1)
    assert not LogEntry.objects.filter(content_type__model="assignment").exists()
    reviewer = make_reviewer()

    outcome = reject_work(assignments=Assignment.objects.filter(pk=leases[0].pk), reason=REASON, reviewer=reviewer)

    assert outcome.changed == 1
    entry = LogEntry.objects.get(content_type__model="assignment", object_id=leases[0].pk)
    assert entry.actor == reviewer
    assert entry.changes_dict["work_state"] == [WorkState.PROVISIONAL, WorkState.REJECTED]
    assert entry.changes_dict["review_reason"] == ["", REASON]
    client.force_login(reviewer)
    page = client.get(reverse("admin:annotation_answer_history", args=[leases[0].pk]))
    assert page.status_code == 200
    assert REASON in page.content.decode() and "reviewer" in page.content.decode()


def test_rejecting_again_what_is_already_rejected_writes_nothing_more(mturk):
    spammer = WorkerFactory(external_id="A1SPAMMER00000010")
    _study, leases = _verified_on_mturk(mturk, spammer, count=1)
    answers = Assignment.objects.filter(pk=leases[0].pk)
    reject_work(assignments=answers, reason=REASON, reviewer=make_reviewer())
    reject_work(assignments=answers, reason=REASON, reviewer=User.objects.get(username="reviewer"))
    assert LogEntry.objects.filter(content_type__model="assignment").count() == 1


def test_annotators_answers_add_no_audit_entry(mturk):
    family = FamilyFactory()
    before = set(LogEntry.objects.values_list("content_type__model", flat=True).distinct())
    _verified_on_mturk(mturk, WorkerFactory(external_id="A1GOODWORKER00001"), count=2, family=family)
    written = set(LogEntry.objects.values_list("content_type__model", flat=True).distinct()) - before
    # The stage launch and the references the set-up stores are the researcher's side; the
    # worker's arrival, lease and verifications write nothing.
    assert not written & {"worker", "assignment", "workunit", "verification", "submission"}


def test_a_tournament_s_history_is_behind_its_history_button_and_its_deletion_is_written(admin_client):
    tournament = create_tournament(name="Spring models", sample=False)
    page = admin_client.get(reverse("admin:annotation_tournament_change", args=[tournament.pk]))
    history = reverse("admin:annotation_tournament_history", args=[tournament.pk])
    assert history in page.content.decode()
    shown = admin_client.get(history)
    assert shown.status_code == 200 and "Spring models" in shown.content.decode()
    assert LogEntry.objects.get_for_object(Tournament.objects.get(pk=tournament.pk)).filter(
        action=LogEntry.Action.CREATE).exists()

    admin_client.post(reverse("admin:annotation_tournament_delete", args=[tournament.pk]), {"post": "yes"})
    assert not Tournament.objects.filter(pk=tournament.pk).exists()
    deleted = LogEntry.objects.get(action=LogEntry.Action.DELETE, content_type__model="tournament",
                                   object_id=tournament.pk)
    assert deleted.actor.username == "admin" and deleted.object_repr == "Spring models"
