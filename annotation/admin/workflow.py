"""The workflow page of a family and of a tournament: the pipeline's steps in order with
their counts, the jobs running now, and the one next action (paper §2.1, Fig. 3; §4).

A researcher should never have to know which admin action comes next. Each page lists every step
from instruction generation to the snapshot, says how far each has got, and offers one button.
The button posts the key of the action the page showed; the server recomputes the next action and
refuses when it has changed meanwhile (another tab, a double click), so a click never does
something the researcher did not see.
"""


from django.db import transaction
from django.urls import reverse

# The judge mode the workflow's button runs; the tournament list's actions offer the other modes.
from annotation.admin.family_workflow import family_workflow
from annotation.admin.tournament_workflow import tournament_workflow
from annotation.admin.worker_check import say_if_jobs_will_wait
from annotation.admin.workflow_steps import WORKFLOW_JUDGE_MODE, plural
from annotation.collection import captions
from annotation.collection.waiting import settle_family
from annotation.crowdwork import stages
from annotation.datasets import snapshots
from annotation.exceptions import AnnotationError
from annotation.judging.runner import create_judge_run
from annotation.models import (
    Instance,
    Stage,
)
from annotation.preferences import answers, tournaments
from crowdbench.jobs import enqueue

# --- performing the next action ------------------------------------------------------------------


def perform_family_action(*, family, key):
    """Run the family's next action if it is still `key`.

    Returns (message for the researcher, whether a background job was queued).
    """
    action = family_workflow(family).next_action
    _check_still_next(action, key)
    if key.startswith("launch_"):
        stage = key.removeprefix("launch_")
        stages.launch_stage(family=family, stage=stage)
        return f"{Stage(stage).label} launched for “{family.name}”; its work units are being created.", True
    if key == "generate_references":
        waiting = list(family.instances.filter(status=Instance.Status.AWAITING_REFERENCE)
                       .values_list("pk", flat=True))
        for instance_id in waiting:
            captions.queue_reference_generation(instance_id=instance_id)
        return f"Queued reference generation for {plural(len(waiting), 'instance')}.", True
    if key == "settle":
        settled = settle_family(family)
        return f"Every item of “{family.name}” asked again: {settled.message() or 'nothing needed changing'}.", False
    raise AnnotationError(f"“{action.label}” is done on its own page.")


def perform_tournament_action(*, tournament, key, user):
    action = tournament_workflow(tournament).next_action
    _check_still_next(action, key)
    if key == "generate_answers":
        endpoints = answers.start_generation(tournament=tournament)
        return (f"Answers from {plural(len(endpoints), 'endpoint model')} are being generated in the "
                "background; sample the battles once they are in."), True
    if key == "sample_battles":
        count = tournaments.sample_battles(tournament=tournament)
        return f"{plural(count, 'battle')} sampled for “{tournament.name}”.", False
    if key == "launch_tournament":
        tournaments.launch_tournament(tournament=tournament)
        return f"“{tournament.name}” launched: its battles are in the annotators' queue.", False
    if key == "run_judge":
        run = create_judge_run(tournament=tournament, mode=WORKFLOW_JUDGE_MODE)
        enqueue("tasks.run_judge", run.pk)
        return f"Judge run #{run.pk} ({run.engine}) queued.", True
    if key == "build_snapshot":
        # The tournament's group's snapshot: a snapshot of no group holds no group's tournament.
        snapshot = snapshots.request_snapshot(created_by=user, tournaments=[tournament], group=tournament.group,
                                              note=f"Built from the workflow of “{tournament.name}”.")
        return f"{snapshot} is being built in the background.", True
    raise AnnotationError(f"“{action.label}” is done on its own page.")


def _check_still_next(action, key):
    if not action.is_post or action.key != key:
        raise AnnotationError(
            "The next step changed since this page was shown (another tab, or a job finished); "
            f"it is now “{action.label}”. Nothing was done.")


# --- the pages -----------------------------------------------------------------------------------


class WorkflowAdminMixin:
    """Adds `<id>/workflow/` (the page), `<id>/workflow/status.json` (what its script polls) and
    `<id>/workflow/next/` (the button) to a ModelAdmin; subclasses say how to build and perform."""

    workflow_template = "admin/annotation/workflow.html"

    def build_workflow(self, obj):
        raise NotImplementedError

    def perform_next_action(self, request, obj, key):
        raise NotImplementedError

    def _workflow_name(self, suffix):
        return f"{self.opts.app_label}_{self.opts.model_name}_{suffix}"

    def get_urls(self):
        from django.urls import path

        wrap = self.admin_site.admin_view
        return [
            path("<int:object_id>/workflow/", wrap(self.workflow_view), name=self._workflow_name("workflow")),
            path("<int:object_id>/workflow/status.json", wrap(self.workflow_status_view),
                 name=self._workflow_name("workflow_status")),
            path("<int:object_id>/workflow/next/", wrap(self.workflow_next_view),
                 name=self._workflow_name("workflow_next")),
        ] + super().get_urls()

    def _workflow_object(self, request, object_id):
        from django.core.exceptions import PermissionDenied
        from django.http import Http404

        obj = self.get_object(request, str(object_id))
        if obj is None:
            raise Http404(f"No {self.opts.verbose_name} with id {object_id}.")
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        return obj

    def workflow_view(self, request, object_id):
        from django.template.response import TemplateResponse

        obj = self._workflow_object(request, object_id)
        workflow = self.build_workflow(obj)
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "original": obj,
            "title": workflow.title, "workflow": workflow,
            "can_act": self.has_change_permission(request, obj),
            "status_url": reverse(f"admin:{self._workflow_name('workflow_status')}", args=[obj.pk]),
            "next_url": reverse(f"admin:{self._workflow_name('workflow_next')}", args=[obj.pk]),
            "change_url": reverse(f"admin:{self._workflow_name('change')}", args=[obj.pk]),
        }
        return TemplateResponse(request, self.workflow_template, context)

    def workflow_status_view(self, request, object_id):
        from django.http import JsonResponse

        obj = self._workflow_object(request, object_id)
        response = JsonResponse(self.build_workflow(obj).as_json())
        response["Cache-Control"] = "no-store"
        return response

    def workflow_next_view(self, request, object_id):
        from django.contrib import messages
        from django.http import HttpResponseNotAllowed
        from django.shortcuts import redirect

        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        obj = self._workflow_object(request, object_id)
        back = redirect(f"admin:{self._workflow_name('workflow')}", obj.pk)
        if not self.has_change_permission(request, obj):
            self.message_user(request, f"You may not change this {self.opts.verbose_name}.", messages.ERROR)
            return back
        try:
            with transaction.atomic():
                text, queued = self.perform_next_action(request, obj, request.POST.get("action", ""))
        except AnnotationError as error:
            self.message_user(request, str(error), messages.ERROR)
            return back
        self.message_user(request, text, messages.SUCCESS)
        if queued:
            say_if_jobs_will_wait(self, request)
        return back
