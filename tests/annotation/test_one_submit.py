"""Every crowd stage's answer comes in through one submit, and a unit closes by one rule (issue 40):
the places that could write them again are enumerated from the code, so a new stage's submit that
locks on its own, or a new path that closes a unit by a rule of its own, fails here."""

import ast

from tests.paths import PROJECT

CODE = ("annotation", "mturk", "tasks", "frontend", "webhooks")


def _modules():
    for package in CODE:
        for path in sorted((PROJECT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path.relative_to(PROJECT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _calls_of(name):
    return sorted({module for module, tree in _modules() for node in ast.walk(tree)
                   if isinstance(node, ast.Call)
                   and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)})


def _unit_closed_to_done(node):
    """`<x>.status = WorkUnit.Status.DONE`, or `.update(status=WorkUnit.Status.DONE)`."""
    def is_done(value):
        return (isinstance(value, ast.Attribute) and value.attr == "DONE"
                and isinstance(value.value, ast.Attribute) and value.value.attr == "Status"
                and getattr(value.value.value, "id", None) == "WorkUnit")

    if isinstance(node, ast.Assign):
        return is_done(node.value) and any(getattr(target, "attr", None) == "status" for target in node.targets)
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "update":
        return any(keyword.arg == "status" and is_done(keyword.value) for keyword in node.keywords)
    return False


def test_every_stage_submits_through_submit_answer():
    assert _calls_of("lock_assignment_for_submission") == ["annotation/crowdwork/answers.py"]
    submitting = _calls_of("submit_answer")
    assert {"annotation/collection/instructions.py", "annotation/collection/captions.py",
            "annotation/collection/verification.py", "annotation/preferences/judgements.py"} <= set(submitting)


def test_a_unit_closes_by_one_rule():
    closing = sorted({module for module, tree in _modules() for node in ast.walk(tree) if _unit_closed_to_done(node)})
    assert closing == ["annotation/crowdwork/stopping.py"]
    assert set(_calls_of("close_if_answered")) == {"annotation/crowdwork/answers.py"}
