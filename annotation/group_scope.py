"""Every read of a group-owned model goes through the reader's scope (crowdbench/scoping.py).

`scope_group_owned_models` gives each model of annotation/teams.py's GROUP_PATHS a manager that
narrows every query it starts, related managers and the admin's, the API's and every view's
included, to the rows the scope may see; a model added to GROUP_PATHS is scoped the day it is
added. `RequestScopeMiddleware` puts each request in its maker's scope. Forward relations
(`answer.unit`) and Django's own deletes and saves go through the plain base manager: a row already
reached is not hidden from the code holding it.
"""

from django.apps import apps

from annotation import teams
from crowdbench import scoping


class GroupScopedManagerMixin:
    """Narrows what the manager reads to the current scope, and refuses to read in none."""

    def get_queryset(self):
        rows = super().get_queryset()
        scope = scoping.current()
        if scope is None:
            raise scoping.ScopeError(
                f"{self.model._meta.label} is owned by research groups and was read in no scope. A request "
                "is in its user's scope; code that acts for every group (a job, a command, a test's "
                "set-up) says so with crowdbench.scoping.every_group(reason).")
        return scope.narrow(rows)


_scoped_classes = {}


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
    reach is bounded by their lease and their signed token, and a worker works for every group."""

    def __init__(self, user):
        self.user = user

    def narrow(self, rows):
        user = self.user
        if not user.is_authenticated or user.is_superuser or not (user.is_staff or teams.is_member(user)):
            return rows
        return teams.scoped(rows, user)

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
