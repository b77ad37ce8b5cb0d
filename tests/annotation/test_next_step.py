"""What an annotator is shown next (annotation/crowdwork/next_step.py): one decision per kind, each with the
rule that chose it, and the page that renders it without deciding anything itself."""

import ast
import inspect
import textwrap

import pytest
from django.urls import URLResolver, get_resolver

from annotation.crowdwork.leases import lease_terms, return_held
from annotation.crowdwork.next_step import Step, live_gold_item, next_step
from annotation.crowdwork.queue import holds_a_lease, lease_unit, next_assignment, units_open_to
from annotation.crowdwork.standing import may_work
from annotation.models import Assignment, Stage, Worker, WorkerBlock, WorkerQualification
from frontend import annotator_views
from mturk import links
from mturk.models import StudyCompletion
from mturk.participants import done_in_study, earned_code, finish_participating, finished, next_step_in_study
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


# The functions that give a worker a lease: a page reaches them through `next_step` alone.
LEASING = (next_assignment, lease_unit)
# What the domain decides, which a page that leases must leave to it as well.
DECIDING = (*LEASING, units_open_to, holds_a_lease, may_work, live_gold_item, finished, earned_code,
            finish_participating, return_held)
DOORS = (next_step, next_step_in_study)
_PROJECT = ("frontend", "annotation", "mturk", "crowdbench")


def _callees(function):
    """The project's functions `function` calls by a name it can see (a module-level name, or an
    attribute of an imported module); a call through an object (`page.store`) is not followed."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError):
        return []
    names = function.__globals__
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = None
        if isinstance(node.func, ast.Name):
            target = names.get(node.func.id)
        elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and inspect.ismodule(names.get(node.func.value.id)):
            target = getattr(names[node.func.value.id], node.func.attr, None)
        target = inspect.unwrap(target) if inspect.isfunction(target) else None
        if target is not None and target.__module__.startswith(_PROJECT):
            found.append(target)
    return found


def _reached(view, *, doors=()):
    """Every project function `view` reaches, each with the chain of calls that reaches it first,
    not going through `doors`."""
    start = inspect.unwrap(view)
    chains, waiting = {start: (start.__name__,)}, [start]
    while waiting:
        function = waiting.pop()
        if function in doors:
            continue
        for callee in _callees(function):
            if callee not in chains:
                chains[callee] = (*chains[function], callee.__name__)
                waiting.append(callee)
    return chains


def _frontend_views():
    views, patterns = {}, list(get_resolver().url_patterns)
    while patterns:
        pattern = patterns.pop()
        if isinstance(pattern, URLResolver):
            patterns.extend(pattern.url_patterns)
        elif pattern.callback.__module__.startswith("frontend"):
            views[pattern.name] = pattern.callback
    return views


def test_every_page_that_leases_does_so_through_next_step_and_decides_nothing_itself():
    leasing_views = {name: view for name, view in _frontend_views().items()
                     if any(function in _reached(view) for function in LEASING)}
    # The pages that show a task, found by what they call: a new page that leases is covered here.
    assert {"stage", "unit"} <= set(leasing_views)
    for name, view in leasing_views.items():
        outside = _reached(view, doors=DOORS)
        assert any(door in outside for door in DOORS), name
        decided = [" -> ".join(outside[function]) for function in DECIDING if function in outside]
        assert not decided, f"the {name} page decides for itself: {decided}"


def test_a_decision_is_rendered_with_what_came_with_it_and_nothing_asked_again():
    # The lease's terms, the participant's progress and the study's code come with the step.
    came_with_the_step = (lease_terms, done_in_study, links.completion)
    reached = _reached(annotator_views._shown_in_study)
    assert [function.__name__ for function in came_with_the_step if function in reached] == []
