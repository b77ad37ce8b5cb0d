"""The workflow of an instruction family: its collection stages in order, with counts, running jobs
and the one next action."""

import hashlib
from urllib.parse import urlencode

from django.db.models import Count, Q
from django.urls import reverse

from annotation import llm

# The judge mode the workflow's button runs; the tournament list's actions offer the other modes.
from annotation.admin.tournament_workflow import TOURNAMENT_STEP_LABELS, tournament_steps
from annotation.admin.workflow_steps import (
    CROWD_STAGES,
    STAGE_BUTTONS,
    NextAction,
    Step,
    Workflow,
    admin_url,
    collection_jobs,
    job_warnings,
    plural,
    recent_jobs,
)
from annotation.collection import progress
from annotation.collection.waiting import Waits, waits_for
from annotation.collection.workflow_counts import workflow_figures
from annotation.models import (
    DecisionChange,
    Instance,
    InstructionFamily,
    JudgeRun,
    Snapshot,
    Stage,
    StageConfig,
    Tournament,
    WorkUnit,
)
from annotation.models.benchmark import benchmark_instances
from annotation.sql import KeysPresent
from crowdbench import shared_cache

HELD_REMEMBERED_SECONDS = 24 * 60 * 60


def _tournaments_of(family):
    """Tournaments of the family's research group whose battles may include it: those naming it,
    and those naming none (which draw on every family of their group)."""
    return Tournament.objects.filter(group_id=family.group_id).annotate(n_families=Count("families")).filter(
        Q(families=family) | Q(n_families=0)
    ).distinct().order_by("-created_at")


def family_workflow(family):
    launched = set(StageConfig.objects.filter(family=family, launched_at__isnull=False)
                   .values_list("stage", flat=True))
    figures = workflow_figures(InstructionFamily.objects.filter(pk=family.pk))
    by_status = figures.instances
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
    models, response_count = figures.models, figures.response_count
    is_new = family.source == InstructionFamily.Source.NEW
    tournaments = list(_tournaments_of(family))
    tournament = tournaments[0] if tournaments else None

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
            f"{plural(total, 'instance')} imported from {family.source_dataset}",
            admin_url("instructionfamily_import"), "Import a VisIT-Bench sheet",
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
        admin_url("instance_changelist") + "?" + urlencode({"family__id__exact": family.pk,
                                                          "status__exact": S.AWAITING_REFERENCE}),
        "Instances awaiting a reference",
    ))
    waits = waits_for(family, instances_by_status=by_status)
    in_benchmark = list(benchmark_instances().filter(family=family).values_list("pk", flat=True))
    steps.append(Step(
        "verification", "Verification",
        stage_state(Stage.VERIFICATION, with_reference > 0 and not awaiting_verification),
        f"{verified} verified ({len(in_benchmark)} in the benchmark), {discarded} discarded, "
        f"{awaiting_verification} awaiting verification"
        + ("" if Stage.VERIFICATION in launched else "; not launched")
        + _waiting_text(waits)
        + _changed_by_refits(family)
        + _asking(family)
        + f"; verifiers' agreement: Krippendorff's {progress.verification_agreement(family=family).text('reference')}",
        admin_url("instructionfamily_table2") + f"?family={family.pk}", "Table 2 for this family",
    ))
    steps.append(Step(
        "predictions", "Model predictions",
        "done" if response_count else "todo",
        f"{plural(response_count, 'response')} from {plural(models, 'model')} on "
        f"{plural(verified, 'verified instance')}",
        admin_url("modelresponse_import"), "Import predictions",
    ))
    steps.extend(tournament_steps(tournament, family=family) if tournament else _no_tournament_steps())
    steps = [_snapshot_step(in_benchmark) if step.key == "snapshot" else step for step in steps]

    jobs = collection_jobs(family, captioned=captioned, with_reference=with_reference)
    if tournament:
        runs = JudgeRun.objects.filter(tournament__in=tournaments).select_related("tournament")
        jobs += recent_jobs(list(runs), list(Snapshot.objects.filter(tournaments__in=tournaments).distinct()))

    collecting = bool(sum(open_units.values())) or waits.crowd_at_work
    next_action = _family_next_action(
        family, launched=launched, is_new=is_new, total=total, awaiting_reference=awaiting_reference,
        collecting=collecting, verified=verified, response_count=response_count, tournament=tournament,
        waits=waits,
    )
    example = {"instruction": family.seed_instruction, "response": family.seed_response,
               "images": [seed.image for seed in family.seedimage_set.select_related("image")]}
    return Workflow(title=f"Workflow of “{family.name}”", steps=steps, next_action=next_action,
                    jobs=jobs, warnings=job_warnings(jobs), example=example)


def _waiting_text(waits):
    """What the undecided instances wait for, from the one definition (collection/waiting.py)."""
    counts = waits.counts()
    parts = [f"{counts[wait]} for {wait.value}" for wait in Waits
             if counts[wait] and wait not in (Waits.DECIDED, Waits.DISCARDED, Waits.NO_NEXT_STEP)]
    if counts[Waits.NO_NEXT_STEP]:
        parts.append(f"{counts[Waits.NO_NEXT_STEP]} with no next step")
    if waits.slots_missing:
        parts.append(f"{waits.slots_missing} instance(s) of the target with no task asking for them")
    return f"; undecided instances waiting: {', '.join(parts)}" if parts else ""


def _changed_by_refits(family):
    """How many worker-model decisions a later fit changed (or would have, where they stand)."""
    changes = DecisionChange.objects.filter(reference__instance__family=family)
    applied = changes.filter(applied=True).count()
    standing = changes.filter(applied=False).count()
    if not applied and not standing:
        return ""
    text = f"; {applied} worker-model decision(s) revised by a later fit"
    if standing:
        text += f", {standing} left standing (more was built on them)"
    return text


def _snapshot_step(in_benchmark):
    """The latest snapshot holding any of the family's benchmark instances, whichever way it was
    built (a tournament's workflow, the snapshot page, the command)."""
    holding = (Snapshot.objects.filter(instance_digests__has_any_keys=[str(pk) for pk in in_benchmark])
               if in_benchmark else Snapshot.objects.none())
    latest = holding.order_by("-version").first()
    if latest is None:
        return Step("snapshot", "Snapshot", "todo", "no snapshot holds this family yet")
    held = _held_by(latest, in_benchmark)
    state = {Snapshot.Status.DONE: "done", Snapshot.Status.FAILED: "todo"}.get(latest.status, "active")
    return Step("snapshot", "Snapshot", state,
                f"{latest}: {latest.get_status_display().lower()}, holds {held} of the "
                f"{len(in_benchmark)} instance(s) in the benchmark now",
                admin_url("snapshot_change", latest.pk), "Files")


def _held_by(snapshot, instance_ids):
    """How many of `instance_ids` `snapshot` holds. Reading a campaign's digest (7 MB, 90,000
    keys) takes PostgreSQL 10 to 15 ms each time; a built snapshot never changes, so the count for
    the same ids is remembered in the shared cache for a day."""
    built = snapshot.status == Snapshot.Status.DONE
    key = f"snapshot-holds:{snapshot.pk}:" + hashlib.sha256(",".join(map(str, instance_ids)).encode()).hexdigest()
    held = shared_cache.get(key) if built else None
    if held is None:
        # Counted for the latest alone: PostgreSQL may compute a listed expression on every row it sorts.
        held = (Snapshot.objects.filter(pk=snapshot.pk).annotate(held=KeysPresent("instance_digests", instance_ids))
                .values_list("held", flat=True).get())
        if built:
            shared_cache.set(key, held, HELD_REMEMBERED_SECONDS)
    return held


def _asking(family):
    """How verification asks, when it asks until decided, and what it has bought so far."""
    config = StageConfig.objects.filter(family=family, stage=Stage.VERIFICATION, adaptive=True).first()
    if config is None:
        return ""
    bought = progress.answers_bought(family=family, stage=Stage.VERIFICATION)
    if config.stopping in StageConfig.WEIGHED_STOPPING:
        by = (" on sound and on flawed references" if config.stopping == StageConfig.Stopping.WORKER_ACCURACY_BY_VERDICT
              else "")
        rule = (f"each verifier weighed by their accuracy{by}, to a posterior of {config.posterior_threshold:.2f}, "
                f"up to {config.overlap}")
    else:
        rule = f"{config.agree_to_decide} agreeing of up to {config.overlap}"
    return f"; ask until decided ({rule}): {bought.summary()}"


def _no_tournament_steps():
    return [Step(key, label, "todo", "no tournament includes this family yet")
            for key, label in TOURNAMENT_STEP_LABELS]


def _family_next_action(family, *, launched, is_new, total, awaiting_reference, collecting, verified,
                        response_count, tournament, waits):
    if not is_new and not total:
        return NextAction("import", "Import a VisIT-Bench sheet",
                          "This family is reformatted from an existing dataset: its instances come "
                          "from a sheet.", url=admin_url("instructionfamily_import"))
    for stage in CROWD_STAGES:
        if stage == Stage.INSTRUCTION_GENERATION and not is_new:
            continue
        if stage not in launched and (is_new or _stage_has_work(family, stage)):
            return NextAction(f"launch_{stage}", STAGE_BUTTONS[stage], _LAUNCH_EXPLANATIONS[stage])
    if awaiting_reference:
        if llm.reference_model_configured():
            return NextAction("generate_references",
                              f"Generate candidate references ({awaiting_reference})",
                              "A background job asks the reference model with the paper's prompt; "
                              "verification opens for each answer.")
        first = family.instances.filter(status=Instance.Status.AWAITING_REFERENCE).order_by("pk").first()
        return NextAction("paste_reference", f"Paste a reference for instance #{first.pk}",
                          f"{plural(awaiting_reference, 'instance')} await a reference and no "
                          "reference model is configured, so references are pasted by hand.",
                          url=admin_url("instance_add_reference", first.pk))
    if waits.stuck or waits.slots_missing:
        stuck = len(waits.stuck) + waits.slots_missing
        return NextAction("settle", f"Give {plural(stuck, 'waiting item')} a next step",
                          "Some items wait for nothing: no task asks for them and nothing will decide them "
                          "(a rejection or a changed setting left them so). This asks each again what its "
                          "answers decide and makes the tasks they still need.")
    counts = waits.counts()
    if counts[Waits.REVIEWER]:
        return NextAction("review", f"Review: {plural(counts[Waits.REVIEWER], 'instance')} waiting for a reviewer",
                          "A worker model disagreed with every vote on a reference, or the stage counts only "
                          "accepted answers: a reviewer decides.",
                          url=admin_url("reference_changelist") + "?" + urlencode({
                              "instance__family__id__exact": family.pk, "verdict__exact": "pending"}))
    if counts[Waits.WORKER_MODEL]:
        return NextAction("wait_for_worker_model", "See the worker models",
                          f"{plural(counts[Waits.WORKER_MODEL], 'reference')} have all their answers and wait "
                          "for the worker-model job, which runs a few minutes after answers come in.",
                          url=admin_url("stageconfig_changelist") + f"?family__id__exact={family.pk}")
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
                          url=admin_url("modelresponse_import"))
    if tournament is None:
        add = admin_url("tournament_add") + "?" + urlencode(
            {"families": family.pk, "name": f"{family.name}: pairwise preference"})
        return NextAction("create_tournament", "Create a tournament",
                          "Saving the tournament samples its battles from the verified instances and "
                          "their predictions.", url=add)
    return NextAction("open_tournament", f"Open the workflow of “{tournament.name}”",
                      "The rest of the loop (battles, judgements, leaderboard, snapshot) is the "
                      "tournament's.", url=admin_url("tournament_workflow", tournament.pk))


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
