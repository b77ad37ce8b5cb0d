"""The workflow page of a family and of a preference study: the pipeline's steps in order with
their counts, the jobs running now, and the one next action (paper §2.1, Fig. 3; §4).

A researcher should never have to know which admin action comes next. Each page lists every step
from instruction generation to the snapshot, says how far each has got, and offers one button.
The button posts the key of the action the page showed; the server recomputes the next action and
refuses when it has changed meanwhile (another tab, a double click), so a click never does
something the researcher did not see.
"""

from dataclasses import asdict, dataclass, field
from urllib.parse import urlencode

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.urls import reverse

from annotation import llm
from annotation.admin.worker_check import no_worker_warning, say_if_jobs_will_wait
from annotation.collection import captions, stages
from annotation.datasets import snapshots
from annotation.exceptions import AnnotationError
from annotation.judging.runner import create_judge_run
from annotation.models import (
    HumanJudgement,
    Instance,
    InstructionFamily,
    JudgeRun,
    ModelResponse,
    PreferenceStudy,
    Snapshot,
    Stage,
    StageConfig,
    WorkUnit,
)
from annotation.preferences import studies
from crowdbench.jobs import enqueue
from tasks.jobs import job_key
from tasks.models import Job as JobRecord

# The judge mode the workflow's button runs; the study list's actions offer the other modes.
WORKFLOW_JUDGE_MODE = JudgeRun.Mode.REFERENCE_FREE
CROWD_STAGES = (Stage.INSTRUCTION_GENERATION, Stage.CAPTION, Stage.VERIFICATION)
_STAGE_BUTTONS = {
    Stage.INSTRUCTION_GENERATION: "Launch instruction generation",
    Stage.CAPTION: "Launch captions",
    Stage.VERIFICATION: "Launch verification",
}


@dataclass(frozen=True)
class Step:
    key: str
    label: str
    state: str  # "done", "active" (under way), "todo", "skipped"
    counts: str
    link: str = ""
    link_text: str = ""


@dataclass(frozen=True)
class Job:
    key: str
    label: str
    status: str
    done: int
    total: int
    error: str = ""
    link: str = ""

    @property
    def percent(self):
        return round(100 * self.done / self.total) if self.total else 0

    @property
    def running(self):
        return self.status in ("pending", "running")


@dataclass(frozen=True)
class NextAction:
    """What to do next: a button posting `key`, or a link to the page where it is done."""

    key: str
    label: str
    explanation: str
    url: str = ""  # set: the action is a page to open, not something to run here

    @property
    def is_post(self):
        return not self.url


@dataclass
class Workflow:
    title: str
    steps: list[Step]
    next_action: NextAction
    jobs: list[Job] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # A family's seed example (instruction, response, images), shown so the page says what it is about.
    example: dict | None = None

    def as_json(self):
        return {
            "steps": [asdict(step) for step in self.steps],
            "jobs": [{**asdict(job), "percent": job.percent, "running": job.running} for job in self.jobs],
            "next": {"key": self.next_action.key, "label": self.next_action.label},
            "warnings": self.warnings,
        }


def _admin(name, *args):
    return reverse(f"admin:annotation_{name}", args=args)


def _plural(count, word, plural=None):
    return f"{count} {word if count == 1 else (plural or word + 's')}"


# --- jobs ----------------------------------------------------------------------------------------


def _judge_jobs(runs):
    return [
        Job(key=f"judge-run-{run.pk}", label=f"LLM judge run #{run.pk}: {run.engine}, "
                                             f"{run.get_mode_display()}",
            status=run.status, done=run.done_calls, total=run.total_calls, error=run.error,
            link=_admin("judgerun_change", run.pk))
        for run in runs
    ]


def _snapshot_jobs(snapshot_rows):
    return [
        Job(key=f"snapshot-{snapshot.pk}", label=f"{snapshot}: {snapshot.progress_message or 'building'}",
            status=snapshot.status, done=snapshot.progress, total=100, error=snapshot.error,
            link=_admin("snapshot_change", snapshot.pk))
        for snapshot in snapshot_rows
    ]


def _recent_jobs(runs, snapshot_rows):
    """Jobs still running, and those that failed, newest first: a failure stays in sight."""
    shown = [run for run in runs if run.status != JudgeRun.Status.DONE]
    shown_snapshots = [s for s in snapshot_rows if s.status != Snapshot.Status.DONE]
    return _judge_jobs(shown[:5]) + _snapshot_jobs(shown_snapshots[:3])


def _collection_jobs(family, *, captioned, with_reference):
    """The family's background work as the job records have it: work units being created, and
    candidate references being generated (one bar), with every failure and its reason."""
    awaiting = family.instances.filter(status=Instance.Status.AWAITING_REFERENCE).values_list("pk", flat=True)
    reference_keys = [job_key("tasks.generate_reference", [pk]) for pk in awaiting]
    unit_keys = [job_key("tasks.create_work_units", [family.pk, stage]) for stage in CROWD_STAGES]
    records = list(JobRecord.objects.filter(key__in=reference_keys + unit_keys)
                   .exclude(status=JobRecord.Status.DONE))
    active = (JobRecord.Status.QUEUED, JobRecord.Status.RUNNING, JobRecord.Status.RETRYING)
    jobs = []
    references_active = [r for r in records if r.task == "tasks.generate_reference" and r.status in active]
    if references_active:
        jobs.append(Job(key="references", label=f"Candidate references ({len(references_active)} queued or running)",
                        status="running", done=with_reference, total=captioned,
                        link=_admin("instance_changelist") + "?" + urlencode(
                            {"family__id__exact": family.pk, "status__exact": Instance.Status.AWAITING_REFERENCE})))
    for record in records:
        if record.task == "tasks.create_work_units" and record.status in active:
            jobs.append(Job(key=f"job-{record.pk}", label=f"Creating the work units of {Stage(record.args[1]).label}",
                            status="running", done=0, total=0, link=_admin("instructionfamily_change", family.pk)))
    for record in records:
        if record.status == JobRecord.Status.FAILED:
            what = (f"Reference for instance #{record.args[0]}" if record.task == "tasks.generate_reference"
                    else f"Work units of {Stage(record.args[1]).label}")
            jobs.append(Job(key=f"job-{record.pk}", label=f"{what}: failed after {_plural(record.attempts, 'attempt')}",
                            status="failed", done=0, total=0, error=record.error,
                            link=reverse("admin:tasks_job_change", args=[record.pk])))
    return jobs


def _warnings(jobs):
    # Said whatever the jobs listed: launching a stage queues a job this page does not list.
    warning = no_worker_warning()
    return [warning] if warning else []


# --- a family ------------------------------------------------------------------------------------


def _studies_of(family):
    """Studies whose battles may include this family: those naming it, and those naming none."""
    return PreferenceStudy.objects.annotate(n_families=Count("families")).filter(
        Q(families=family) | Q(n_families=0)
    ).distinct().order_by("-created_at")


def family_workflow(family):
    launched = set(StageConfig.objects.filter(family=family, launched_at__isnull=False)
                   .values_list("stage", flat=True))
    by_status = dict(family.instances.values_list("status").annotate(n=Count("pk")).order_by())
    S = Instance.Status
    total = sum(by_status.values())
    verified = by_status.get(S.VERIFIED, 0)
    discarded = by_status.get(S.DISCARDED, 0)
    awaiting_caption = by_status.get(S.AWAITING_CAPTION, 0)
    awaiting_reference = by_status.get(S.AWAITING_REFERENCE, 0)
    awaiting_verification = by_status.get(S.AWAITING_VERIFICATION, 0)
    written = total - discarded
    open_units = dict(
        WorkUnit.objects.filter(family=family, status=WorkUnit.Status.OPEN, stage__in=CROWD_STAGES)
        .values_list("stage").annotate(n=Count("pk")).order_by()
    )
    responses = ModelResponse.objects.filter(instance__family=family, instance__status=S.VERIFIED)
    models = responses.values("model_name").distinct().count()
    response_count = responses.count()
    is_new = family.source == InstructionFamily.Source.NEW
    studies = list(_studies_of(family))
    study = studies[0] if studies else None

    def stage_state(stage, finished):
        if finished:
            return "done"
        return "active" if stage in launched else "todo"

    steps = []
    if is_new:
        steps.append(Step(
            "instruction_generation", "Instruction generation",
            stage_state(Stage.INSTRUCTION_GENERATION, written >= family.target_instances),
            f"{written} of {family.target_instances} instances written"
            + (f"; {discarded} discarded" if discarded else "")
            + ("" if Stage.INSTRUCTION_GENERATION in launched else "; not launched"),
        ))
    else:
        steps.append(Step(
            "import", "Import the sheet", "done" if total else "todo",
            f"{_plural(total, 'instance')} imported from {family.source_dataset}",
            _admin("instructionfamily_import"), "Import a VisIT-Bench sheet",
        ))
    captioned = total - awaiting_caption
    steps.append(Step(
        "caption", "Instruction-conditioned captions",
        stage_state(Stage.CAPTION, total > 0 and awaiting_caption == 0),
        f"{captioned} of {total} instances captioned"
        + ("" if Stage.CAPTION in launched else "; not launched"),
    ))
    with_reference = captioned - awaiting_reference
    steps.append(Step(
        "reference", "Candidate references",
        "done" if captioned and not awaiting_reference else ("active" if awaiting_reference else "todo"),
        f"{with_reference} of {captioned} captioned instances have a reference"
        + ("" if llm.reference_model_configured() else "; no model configured: paste them by hand"),
        _admin("instance_changelist") + "?" + urlencode({"family__id__exact": family.pk,
                                                          "status__exact": S.AWAITING_REFERENCE}),
        "Instances awaiting a reference",
    ))
    steps.append(Step(
        "verification", "Verification",
        stage_state(Stage.VERIFICATION, with_reference > 0 and not awaiting_verification),
        f"{verified} verified, {discarded} discarded, {awaiting_verification} awaiting verification"
        + ("" if Stage.VERIFICATION in launched else "; not launched"),
        _admin("instructionfamily_table2") + f"?family={family.pk}", "Table 2 for this family",
    ))
    steps.append(Step(
        "predictions", "Model predictions",
        "done" if response_count else "todo",
        f"{_plural(response_count, 'response')} from {_plural(models, 'model')} on "
        f"{_plural(verified, 'verified instance')}",
        _admin("modelresponse_import"), "Import predictions",
    ))
    steps.extend(_study_steps(study, family=family) if study else _no_study_steps())

    jobs = _collection_jobs(family, captioned=captioned, with_reference=with_reference)
    if study:
        runs = JudgeRun.objects.filter(study__in=studies).select_related("study")
        jobs += _recent_jobs(list(runs), list(Snapshot.objects.filter(studies__in=studies).distinct()))

    collecting = bool(sum(open_units.values())) or awaiting_caption or awaiting_verification
    next_action = _family_next_action(
        family, launched=launched, is_new=is_new, total=total, awaiting_reference=awaiting_reference,
        collecting=collecting, verified=verified, response_count=response_count, study=study,
    )
    example = {"instruction": family.seed_instruction, "response": family.seed_response,
               "images": [seed.image for seed in family.seedimage_set.select_related("image")]}
    return Workflow(title=f"Workflow of “{family.name}”", steps=steps, next_action=next_action,
                    jobs=jobs, warnings=_warnings(jobs), example=example)


def _no_study_steps():
    return [Step(key, label, "todo", "no preference study includes this family yet")
            for key, label in _STUDY_STEP_LABELS]


def _family_next_action(family, *, launched, is_new, total, awaiting_reference, collecting, verified,
                        response_count, study):
    if not is_new and not total:
        return NextAction("import", "Import a VisIT-Bench sheet",
                          "This family is reformatted from an existing dataset: its instances come "
                          "from a sheet.", url=_admin("instructionfamily_import"))
    for stage in CROWD_STAGES:
        if stage == Stage.INSTRUCTION_GENERATION and not is_new:
            continue
        if stage not in launched and (is_new or _stage_has_work(family, stage)):
            return NextAction(f"launch_{stage}", _STAGE_BUTTONS[stage], _LAUNCH_EXPLANATIONS[stage])
    if awaiting_reference:
        if llm.reference_model_configured():
            return NextAction("generate_references",
                              f"Generate candidate references ({awaiting_reference})",
                              "A background job asks the reference model with the paper's prompt; "
                              "verification opens for each answer.")
        first = family.instances.filter(status=Instance.Status.AWAITING_REFERENCE).order_by("pk").first()
        return NextAction("paste_reference", f"Paste a reference for instance #{first.pk}",
                          f"{_plural(awaiting_reference, 'instance')} await a reference and no "
                          "reference model is configured, so references are pasted by hand.",
                          url=_admin("instance_add_reference", first.pk))
    if collecting:
        return NextAction("wait_for_annotators", "See what annotators see",
                          "Annotators are at work; this page updates as they submit. Nothing to "
                          "do here until they finish.", url=reverse("frontend:home"))
    if not verified:
        return NextAction("wait_for_annotators", "See what annotators see",
                          "No instance is verified yet.", url=reverse("frontend:home"))
    if not response_count:
        return NextAction("import_predictions", "Import predictions",
                          "On the import page, download this family's verified sheet, add a "
                          "“<model> prediction” column per model, and import it.",
                          url=_admin("modelresponse_import"))
    if study is None:
        add = _admin("preferencestudy_add") + "?" + urlencode(
            {"families": family.pk, "name": f"{family.name}: pairwise preference"})
        return NextAction("create_study", "Create a preference study",
                          "Saving the study samples its battles from the verified instances and "
                          "their predictions.", url=add)
    return NextAction("open_study", f"Open the workflow of “{study.name}”",
                      "The rest of the loop (battles, judgements, leaderboard, snapshot) is the "
                      "study's.", url=_admin("preferencestudy_workflow", study.pk))


_LAUNCH_EXPLANATIONS = {
    Stage.INSTRUCTION_GENERATION: "Annotators see the seed example and write new instructions with "
                                  "their own images, up to the family's target.",
    Stage.CAPTION: "Annotators write an instruction-conditioned caption for each new instance "
                   "(units open as instances arrive).",
    Stage.VERIFICATION: "Annotators judge each candidate reference against the image(s).",
}


def _stage_has_work(family, stage):
    """Whether a reformatted family's imported instances still need this crowd stage."""
    S = Instance.Status
    needs = {Stage.CAPTION: [S.AWAITING_CAPTION],
             Stage.VERIFICATION: [S.AWAITING_CAPTION, S.AWAITING_REFERENCE, S.AWAITING_VERIFICATION]}
    return family.instances.filter(status__in=needs[stage]).exists()


# --- a preference study --------------------------------------------------------------------------

_STUDY_STEP_LABELS = (
    ("battles", "Battles sampled"),
    ("launched", "Study launched"),
    ("human_judgements", "Human judgements"),
    ("judge", "LLM judge"),
    ("leaderboard", "Leaderboard"),
    ("snapshot", "Snapshot"),
)


def _study_counts(study):
    battles = study.battles.count()
    humans = HumanJudgement.objects.filter(battle__study=study).count()
    runs = list(study.judge_runs.all())
    latest_snapshot = study.snapshots.order_by("-version").first()
    return battles, humans, runs, latest_snapshot


def _study_steps(study, *, family=None):
    battles, humans, runs, latest_snapshot = _study_counts(study)
    wanted = battles * study.judgements_per_pair
    done_runs = [run for run in runs if run.status == JudgeRun.Status.DONE]
    running = [run for run in runs if run.status in (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING)]
    where = f" in “{study.name}”" if family is not None else ""
    study_link = _admin("preferencestudy_workflow", study.pk)
    steps = [
        Step("battles", "Battles sampled", "done" if battles else "todo",
             f"{_plural(battles, 'battle')}{where}", study_link if family else "",
             "The study's workflow" if family else ""),
        Step("launched", "Study launched", "done" if study.launched_at else "todo",
             f"launched {study.launched_at:%Y-%m-%d %H:%M}" if study.launched_at else "not launched"),
        Step("human_judgements", "Human judgements",
             "done" if wanted and humans >= wanted else ("active" if study.launched_at else "todo"),
             f"{humans} of {wanted} ({study.judgements_per_pair} per battle)",
             _admin("humanjudgement_changelist") + f"?battle__study__id__exact={study.pk}", "Judgements"),
        Step("judge", "LLM judge",
             "done" if done_runs else ("active" if running else "todo"),
             (f"{_plural(len(done_runs), 'run')} done" + (f", {len(running)} running" if running else ""))
             if runs else "no judge run yet",
             _admin("judgerun_changelist") + f"?study__id__exact={study.pk}", "Judge runs"),
        Step("leaderboard", "Leaderboard",
             "done" if humans or done_runs else "todo",
             "Elo, Bradley-Terry and win-rates from the judgements so far" if humans or done_runs
             else "appears once judgements arrive",
             reverse("dashboard:leaderboard", args=[study.pk]), "Open the leaderboard"),
        Step("snapshot", "Snapshot",
             {Snapshot.Status.DONE: "done", Snapshot.Status.FAILED: "todo"}.get(
                 latest_snapshot.status, "active") if latest_snapshot else "todo",
             f"{latest_snapshot}: {latest_snapshot.get_status_display().lower()}" if latest_snapshot
             else "none yet",
             _admin("snapshot_change", latest_snapshot.pk) if latest_snapshot else "",
             "Files" if latest_snapshot else ""),
    ]
    return steps


def study_workflow(study):
    family_ids = list(study.families.values_list("pk", flat=True))
    verified = Instance.objects.filter(status=Instance.Status.VERIFIED)
    if family_ids:
        verified = verified.filter(family_id__in=family_ids)
    responses = ModelResponse.objects.filter(instance__in=verified)
    response_count = responses.count()
    models = responses.values("model_name").distinct().count()
    scope = "its families" if family_ids else "every family"
    steps = [
        Step("verified", "Verified instances", "done" if verified.exists() else "todo",
             f"{_plural(verified.count(), 'verified instance')} in {scope}",
             _admin("instructionfamily_changelist"), "Families"),
        Step("predictions", "Model predictions", "done" if response_count else "todo",
             f"{_plural(response_count, 'response')} from {_plural(models, 'model')}"
             + (" (the verified reference counts as one)" if study.include_reference else ""),
             _admin("modelresponse_import"), "Import predictions"),
        *_study_steps(study),
    ]
    runs = list(study.judge_runs.all())
    snapshot_rows = list(study.snapshots.all())
    jobs = _recent_jobs(runs, snapshot_rows)
    return Workflow(title=f"Workflow of “{study.name}”", steps=steps,
                    next_action=_study_next_action(study, runs, snapshot_rows),
                    jobs=jobs, warnings=_warnings(jobs))


def _study_next_action(study, runs, snapshot_rows):
    battles = study.battles.count()
    if not battles:
        return NextAction("sample_battles", "Sample battles",
                          f"Draws the battles ({study.get_sampling_display().lower()}) from the "
                          "verified instances and their predictions, with the study's seed.")
    if not study.launched_at:
        return NextAction("launch_study", f"Launch the study ({_plural(battles, 'battle')})",
                          f"Puts every battle in the annotators' queue, {study.judgements_per_pair} "
                          "judgements each.")
    if not any(run.status != JudgeRun.Status.FAILED for run in runs):
        mode = JudgeRun.Mode(WORKFLOW_JUDGE_MODE)
        return NextAction("run_judge", "Run the LLM judge",
                          f"{mode.label}, model {settings.JUDGE_MODEL or '(JUDGE_MODEL is not set)'}; "
                          "both orderings of every battle. Other modes are actions of the study list.")
    humans = HumanJudgement.objects.filter(battle__study=study).count()
    wanted = battles * study.judgements_per_pair
    judge_running = any(run.status in (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING) for run in runs)
    leaderboard = reverse("dashboard:leaderboard", args=[study.pk])
    if humans < wanted or judge_running:
        waiting_for = []
        if humans < wanted:
            waiting_for.append(f"human judgements ({humans} of {wanted})")
        if judge_running:
            waiting_for.append("the LLM judge")
        return NextAction("wait_for_judgements", "See the leaderboard so far",
                          f"Waiting for {' and '.join(waiting_for)}; this page updates by itself.",
                          url=leaderboard)
    latest = snapshot_rows[0] if snapshot_rows else None
    if latest is None or latest.status == Snapshot.Status.FAILED:
        return NextAction("build_snapshot", "Build a snapshot",
                          "Freezes the verified benchmark and this study's judgements as a new "
                          "versioned snapshot (CSV, JSONL and Parquet).")
    if latest.status != Snapshot.Status.DONE:
        return NextAction("wait_for_snapshot", "See the snapshot being built",
                          f"{latest} is being built; this page updates by itself.",
                          url=_admin("snapshot_change", latest.pk))
    return NextAction("open_snapshot", f"Download {latest}",
                      "The loop is complete. Build another snapshot after new judgements arrive.",
                      url=_admin("snapshot_change", latest.pk))


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
        return f"Queued reference generation for {_plural(len(waiting), 'instance')}.", True
    raise AnnotationError(f"“{action.label}” is done on its own page.")


def perform_study_action(*, study, key, user):
    action = study_workflow(study).next_action
    _check_still_next(action, key)
    if key == "sample_battles":
        count = studies.sample_battles(study=study)
        return f"{_plural(count, 'battle')} sampled for “{study.name}”.", False
    if key == "launch_study":
        studies.launch_study(study=study)
        return f"“{study.name}” launched: its battles are in the annotators' queue.", False
    if key == "run_judge":
        run = create_judge_run(study=study, mode=WORKFLOW_JUDGE_MODE)
        enqueue("tasks.run_judge", run.pk)
        return f"Judge run #{run.pk} ({run.engine}) queued.", True
    if key == "build_snapshot":
        snapshot = snapshots.request_snapshot(created_by=user, studies=[study],
                                              note=f"Built from the workflow of “{study.name}”.")
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
