"""Every read of a group-owned model goes through the reader's scope (crowdbench/scoping.py).

`scope_group_owned_models` gives each model of annotation/teams.py's GROUP_PATHS a manager that
narrows every query it starts, related managers and the admin's, the API's and every view's
included, to the rows the scope may see; a model added to GROUP_PATHS is scoped the day it is
added. `RequestScopeMiddleware` puts each request in its maker's scope. Forward relations
(`answer.unit`) and Django's own deletes and saves go through the plain base manager: a row already
reached is not hidden from the code holding it.

A query begun in no scope (a choice list or a filter a module builds as it is imported) is narrowed
when it is run, by the scope it is run in, and refused if that is none. A query run inside another
as `Subquery(...)` or `Exists(...)` is compiled from its parts and is narrowed only when it was begun
in a scope; those written here are tied to an outer row that is.
"""

from django.apps import apps

from annotation import teams
from crowdbench import scoping


def _refusal(model):
    return scoping.ScopeError(
        f"{model._meta.label} is owned by research groups and was read in no scope. A request is in its "
        "user's scope; code that acts for every group (a job, a command, a test's set-up) says so with "
        "crowdbench.scoping.every_group(reason).")


def _condition_now(model):
    scope = scoping.current()
    if scope is None:
        raise _refusal(model)
    return scope.condition(model)


class GroupScopedManagerMixin:
    """Narrows what the manager reads to the current scope; begun in none, when it is run."""

    def get_queryset(self):
        rows = super().get_queryset()
        if scoping.current() is None:
            rows.__class__ = _deferred(rows.__class__)
            return rows
        condition = _condition_now(self.model)
        return rows if condition is None else rows.filter(condition)


class _DeferredScope:
    """A query begun in no scope: every way of running it narrows it first, by the scope it runs in."""

    def _in_scope(self):
        rows = self._chain()
        rows.__class__ = self._scoped_class
        condition = _condition_now(self.model)
        if condition is not None:
            # Added to the query itself: a sliced query may no longer be filtered.
            rows.query.add_q(condition)
        return rows

    def _fetch_all(self):
        if self._result_cache is None:
            rows = self._in_scope()
            rows._fetch_all()
            self._result_cache, self._prefetch_done = rows._result_cache, rows._prefetch_done
        super()._fetch_all()

    def _iterator(self, use_chunked_fetch, chunk_size):
        yield from self._in_scope()._iterator(use_chunked_fetch, chunk_size)

    def count(self):
        return len(self._result_cache) if self._result_cache is not None else self._in_scope().count()

    def exists(self):
        return bool(self._result_cache) if self._result_cache is not None else self._in_scope().exists()

    def aggregate(self, *args, **kwargs):
        return self._in_scope().aggregate(*args, **kwargs)

    def update(self, **kwargs):
        return self._in_scope().update(**kwargs)

    def _update(self, values):
        return self._in_scope()._update(values)

    def delete(self):
        return self._in_scope().delete()

    def explain(self, *, format=None, **options):
        return self._in_scope().explain(format=format, **options)

    def resolve_expression(self, *args, **kwargs):
        return self._in_scope().resolve_expression(*args, **kwargs)


_deferred_classes = {}
_scoped_classes = {}


def _deferred(queryset_class):
    if queryset_class not in _deferred_classes:
        deferred = type(f"ScopeDeferred{queryset_class.__name__}", (_DeferredScope, queryset_class),
                        {"_scoped_class": queryset_class})
        _deferred_classes[queryset_class] = deferred
    return _deferred_classes[queryset_class]


def _scoped(manager_class):
    if manager_class not in _scoped_classes:
        _scoped_classes[manager_class] = type(f"GroupScoped{manager_class.__name__}",
                                              (GroupScopedManagerMixin, manager_class), {})
    return _scoped_classes[manager_class]


def scope_group_owned_models():
    """Give every manager of every model of GROUP_PATHS the scope's narrowing (AppConfig.ready)."""
    for label in teams.GROUP_PATHS:
        model = apps.get_model(label)
        for manager in model._meta.managers:
            if not isinstance(manager, GroupScopedManagerMixin):
                manager.__class__ = _scoped(manager.__class__)


class UserScope:
    """What `user` may see: a member their groups' rows, staff outside groups the rows of no group,
    a superuser all. Anyone else (a worker doing a task, a visitor) is not narrowed here: what they
    reach is bounded by their lease and their signed token, and a worker works for every group.
    Members are staff (annotation/teams.py's add_member makes them so)."""

    def __init__(self, user):
        self.user = user

    def condition(self, model):
        user = self.user
        if not user.is_authenticated or not user.is_staff:
            return None
        return teams.seen_by(model, user)

    def __repr__(self):
        return f"UserScope({self.user!r})"


class RequestScope(UserScope):
    """The scope of the request's user as it is when a query runs: the API authenticates a token
    after the middleware has run (Django REST framework then sets the request's user)."""

    def __init__(self, request):
        self.request = request

    @property
    def user(self):
        return self.request.user


class RequestScopeMiddleware:
    """Runs each request in the scope of its user."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with scoping.entered(RequestScope(request)):
            return self.get_response(request)
