"""The response policy every page gets, and the admin's answer to parameters it cannot read."""

import logging

from django.core.exceptions import ValidationError
from django.db import DataError
from django.shortcuts import render

from crowdbench.security import content_security_policy

logger = logging.getLogger(__name__)


class ContentSecurityPolicyMiddleware:
    """A Content-Security-Policy on every response that has none of its own.

    The annotator pages set a stricter one themselves (crowdbench/security.py); the admin, the
    dashboard, the API's browsable pages and the error pages get this one, which keeps images to
    this site, the media origins and the allowed image hosts (an admin's browser never loads a link a
    worker typed from anywhere else, the cloud metadata address included) and scripts to our own.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = content_security_policy(frameable=False, staff_page=True)
        return response


# What a malformed parameter of an admin list raises from Django's own code or an app's filter: a
# row id in a posted action that is no number ("abc"), a date filter past any year, a filter's value
# of the wrong type. Django turns some such parameters into "?e=1"; these it does not.
_UNREADABLE = (ValueError, OverflowError, ValidationError, DataError)


class AdminParametersMiddleware:
    """An admin page of a model (its list, an action on it) whose address or posted selection cannot
    be read answers 400 saying so, not 500: every such page is covered, Django's and the apps',
    since each is found by the model admin its view belongs to."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        request.model_admin = getattr(view_func, "model_admin", None)

    def process_exception(self, request, exception):
        if getattr(request, "model_admin", None) is None or not isinstance(exception, _UNREADABLE):
            return None
        if not (request.GET or "_selected_action" in request.POST):
            return None
        logger.warning("Unreadable parameters of %s", request.path, exc_info=exception)
        return render(request, "admin/unreadable_parameters.html", {
            **request.model_admin.admin_site.each_context(request), "title": "These parameters could not be read",
            "list_url": request.path}, status=400)
