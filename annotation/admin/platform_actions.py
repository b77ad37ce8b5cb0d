"""What the platform admin pages share: the pay permission, an action's form step and its report,
and stopping the workers of rejected work (asked on every form that rejects)."""

from django.contrib import messages
from django.template.response import TemplateResponse

from mturk.exceptions import PlatformError
from mturk.services import audit, reviewing

STOP_WORKERS_LABEL = "Also stop this worker getting more tasks"
STOP_WORKERS_HELP = ("Blocks the worker of each rejected answer, with the reason given for the rejection: the "
                     "queue gives them nothing more, and MTurk blocks them too. Undo it under Worker blocks.")


class PayPermissionMixin:
    def has_pay_permission(self, request):
        return request.user.has_perm(audit.PAY_PERMISSION)


def form_step(modeladmin, request, queryset, *, form_class, title, submit_label, action, intro=""):
    """The form of an admin action: returns the bound valid form, or a response asking for it."""
    if "apply" in request.POST:
        form = form_class(request.POST)
        if form.is_valid():
            return form, None
    else:
        form = form_class()
    return None, TemplateResponse(request, "admin/mturk/action_form.html", {
        **modeladmin.admin_site.each_context(request), "title": title, "form": form,
        "queryset": queryset, "action": action, "submit_label": submit_label, "intro": intro,
        "opts": modeladmin.model._meta,
    })


def report(modeladmin, request, done, problems, verb):
    if done:
        modeladmin.message_user(request, f"{verb} {len(done)}.", messages.SUCCESS)
    for problem in problems:
        modeladmin.message_user(request, problem, messages.WARNING)


def may_block(user):
    """Whether `user` may block workers, as mturk.services.reviewing.block_worker asks: a form that
    rejects offers "stop this worker" only to them, rather than refusing it after the rejection."""
    return user.has_perm(audit.PAY_PERMISSION)


def stop_workers_and_say(request, workers, *, reason):
    """Block `workers` after their work was rejected (mturk.services.reviewing.stop_workers), and
    tell the reviewer whom, and whom not and why."""
    try:
        stopped = reviewing.stop_workers(workers=workers, reason=reason, actor=request.user)
    except PlatformError as error:
        messages.error(request, f"Nobody was blocked: {error}")
        return
    if stopped.message():
        messages.success(request, stopped.message())
    for problem in stopped.problems:
        messages.warning(request, f"Not blocked: {problem}")
