"""What the platform admin pages share: the pay permission, an action's form step and its report."""

from django.contrib import messages
from django.template.response import TemplateResponse

from mturk.services import audit


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
