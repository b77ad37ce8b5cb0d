"""What an annotator is shown next (annotation/crowdwork/next_step.py): one decision per kind, each with the
rule that chose it, and the page that renders it without deciding anything itself."""

import ast
import inspect

import pytest

from annotation.crowdwork.next_step import Step, next_step
from annotation.models import Assignment, Stage, Worker, WorkerBlock, WorkerQualification
from frontend import annotator_views
from mturk.models import StudyCompletion
from mturk.participants import next_step_in_study
from tests.factories import WorkerFactory
from tests.frontend_support import caption_unit, qualification_test, study, verification_unit

pytestmark = pytest.mark.django_db


def test_a_worker_with_nothing_in_the_way_gets_a_new_lease_and_a_reload_resumes_it(worker):
    unit = caption_unit()
    first = next_step(worker=worker, stage=Stage.CAPTION)
    assert first.kind == Step.LEASE and first.assignment.unit == unit and first.reason
    again = next_step(worker=worker, stage=Stage.CAPTION)
    assert again.kind == Step.LEASE and again.assignment.pk == first.assignment.pk


def test_a_worker_the_stage_has_nothing_for_is_told_so(worker):
    assert next_step(worker=worker, stage=Stage.CAPTION).kind == Step.NOTHING
    assert not Assignment.objects.exists()


def test_a_platform_worker_without_the_stages_test_is_sent_to_it_and_leases_nothing(worker):
    verification_unit()
    qualification_test()
    step = next_step(worker=worker, stage=Stage.VERIFICATION)
    assert step.kind == Step.QUALIFICATION_TEST
    assert not Assignment.objects.exists()


def test_a_blocked_worker_is_refused_with_a_reason_meant_for_them(worker):
    caption_unit()
    WorkerBlock.objects.create(worker=worker, reason="Copied answers between tasks.")
    step = next_step(worker=worker, stage=Stage.CAPTION)
    assert step.kind == Step.BLOCKED and "cannot take these tasks" in step.reason
    # The researcher's reason is theirs, not the worker's.
    assert "Copied" not in step.reason


def test_a_paused_worker_is_refused_and_the_lease_they_held_goes_back_at_once(worker):
    verification_unit()
    qualification = qualification_test()
    granted = WorkerQualification.objects.create(qualification=qualification, worker=worker, test_score="1.000")
    held = next_step(worker=worker, stage=Stage.VERIFICATION).assignment
    granted.status, granted.live_accuracy = WorkerQualification.Status.PAUSED, "0.400"
    granted.save()
    step = next_step(worker=worker, stage=Stage.VERIFICATION)
    assert step.kind == Step.PAUSED and "40%" in step.reason
    held.refresh_from_db()
    assert held.status == Assignment.Status.RETURNED


def test_a_qualified_platform_worker_is_shown_a_live_gold_item_where_the_page_can_show_one(worker):
    unit = verification_unit()
    qualification = qualification_test(live_gold_every=1)
    WorkerQualification.objects.create(qualification=qualification, worker=worker, test_score="1.000")
    assert next_step(worker=worker, stage=Stage.VERIFICATION, shows_gold=False).kind == Step.LEASE
    Assignment.objects.all().delete()
    step = next_step(worker=worker, stage=Stage.VERIFICATION, shows_gold=True)
    assert step.kind == Step.GOLD and step.gold_item["id"] in qualification.gold_items.values_list("pk", flat=True)
    assert "answer" not in step.gold_item
    assert not Assignment.objects.exists()
    # A given unit (an MTurk HIT) the worker holds already is resumed, never put off by gold.
    Assignment.objects.all().delete()
    leased = next_step(worker=worker, stage=Stage.VERIFICATION, unit=unit, shows_gold=False).assignment
    resumed = next_step(worker=worker, stage=Stage.VERIFICATION, unit=unit, shows_gold=True)
    assert resumed.kind == Step.LEASE and resumed.assignment.pk == leased.pk


def test_in_house_annotators_skip_the_test_and_get_no_gold():
    verification_unit()
    qualification_test(live_gold_every=1)
    annotator = WorkerFactory(platform=Worker.Platform.LOCAL)
    assert next_step(worker=annotator, stage=Stage.VERIFICATION, shows_gold=True).kind == Step.LEASE


def test_a_study_participant_who_has_done_a_task_is_given_the_code_when_nothing_is_left():
    unit = caption_unit()
    crowd = study(platform=Worker.Platform.PROLIFIC, stage=Stage.CAPTION)
    participant = WorkerFactory(platform=Worker.Platform.PROLIFIC)
    step = next_step_in_study(worker=participant, study=crowd, platform_session_id="S1")
    assert step.kind == Step.LEASE and step.assignment.platform_listing_id == crowd.external_id
    # Nothing done yet: nothing left is only nothing, without the code.
    Assignment.objects.filter(pk=step.assignment.pk).update(status=Assignment.Status.RETURNED)
    unit.status = unit.Status.DONE
    unit.save()
    assert next_step_in_study(worker=participant, study=crowd, platform_session_id="S1").kind == Step.NOTHING
    Assignment.objects.filter(pk=step.assignment.pk).update(status=Assignment.Status.SUBMITTED)
    finished = next_step_in_study(worker=participant, study=crowd, platform_session_id="S1")
    assert (finished.kind, finished.again) == (Step.COMPLETION, False)
    assert StudyCompletion.objects.filter(study=crowd, worker=participant, platform_session_id="S1").exists()
    shown_again = next_step_in_study(worker=participant, study=crowd, platform_session_id="S1")
    assert (shown_again.kind, shown_again.again) == (Step.COMPLETION, True)


# What the domain decides, which the page must leave to it.
DECIDING = {"next_assignment", "lease_unit", "units_open_to", "holds_a_lease", "may_work", "live_gold_item",
            "finished", "earned_code", "finish_participating", "return_held", "qualification_gate", "offer_gold"}


def _calls(function):
    tree = ast.parse(inspect.getsource(function))
    return [node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Name, ast.Attribute))]


@pytest.mark.parametrize("way_in", ["stage_page", "_mturk_unit"])
def test_the_stage_page_asks_the_domain_once_what_to_show_and_decides_nothing_itself(way_in):
    calls = _calls(getattr(annotator_views, way_in))
    assert DECIDING.isdisjoint(calls)
    decisions = [name for name in calls if name in ("next_step", "next_step_in_study")]
    # One per way in: a study's continue link, a study link, an in-house annotator (an MTurk HIT).
    assert len(decisions) == (3 if way_in == "stage_page" else 1)
