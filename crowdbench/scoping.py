"""Whose rows the running code reads: the scope every query of a group-owned model is narrowed by.

A request is in the scope of whoever makes it (annotation/group_scope.py's middleware); a background
job, a management command and the test suite's own set-up act for every group and say so when they
start (`every_group`). A query of a group-owned model made in no scope at all raises `ScopeError`
rather than read every group's rows: code that forgot to say whose rows it reads fails where it is
written, in its first test, instead of leaking in production. A scope is any object with
`condition(model)`: the Q its rows must meet, or None for every row. The idea is django-scopes'; its
manager filters one lookup by one value, and a group's rows here are also those a member of no group
sees (rows of no group, a null lookup) and, for a webhook endpoint, those of any of three owners.
"""

from contextlib import contextmanager
from contextvars import ContextVar


class ScopeError(RuntimeError):
    """A group-owned model was read in no scope."""


class EveryGroup:
    """The scope of code that acts for every group: a job, a command, an operator's shell."""

    def __init__(self, reason):
        self.reason = reason

    def condition(self, model):
        """The condition on `model`'s rows this scope reads (None: every row)."""
        return None

    def __repr__(self):
        return f"EveryGroup({self.reason!r})"


_current = ContextVar("crowdbench_scope", default=None)


def current():
    """The scope the running code is in, or None."""
    return _current.get()


def enter(scope):
    """Enter `scope` until `leave` is given what this returns: for code whose start and end are two
    calls (a job's signals), or for good at a process's entry point (manage.py) that acts for every
    group in all it does."""
    return _current.set(scope)


def leave(entered):
    _current.reset(entered)


@contextmanager
def entered(scope):
    """Run the block in `scope` (None: in no scope, where group-owned rows cannot be read)."""
    token = enter(scope)
    try:
        yield scope
    finally:
        leave(token)


def every_group(reason):
    """Run the block for every group; `reason` says why this code may read them all."""
    return entered(EveryGroup(reason))
