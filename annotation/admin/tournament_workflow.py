"""The workflow of a tournament: battles, the crowd's judgements, the judge, the leaderboard
and the snapshot, with the one next action."""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Q
from django.urls import reverse

from annotation.admin.workflow_steps import (
    WORKFLOW_JUDGE_MODE,
    Job,
    NextAction,
    Step,
    Workflow,
    admin_url,
    job_warnings,
    plural,
    recent_jobs,
)

# The judge mode the workflow's button runs; the tournament list's actions offer the other modes.
from annotation.collection import progress
from annotation.collection.workflow_counts import workflow_figures
from annotation.crowdwork.stopping import stated_accuracy_warning
from annotation.figures import dollars
from annotation.models import (
    HumanJudgement,
    Instance,
    InstructionFamily,
    JudgeRun,
    Snapshot,
    Tournament,
)
from annotation.preferences.answers import tournament_progress
from annotation.preferences.tournaments import current_round
from tasks.jobs import job_key
from tasks.models import Job as JobRecord

TOURNAMENT_STEP_LABELS = (
    ("battles", "Battles sampled"),
    ("launched", "Tournament launched"),
    ("human_judgements", "Human judgements"),
    ("judge", "LLM judge"),
    ("leaderboard", "Leaderboard"),
    ("snapshot", "Snapshot"),
)


@dataclass
class TournamentCounts:
    """What a tournament's steps and its next action read, counted once per page."""

    battles: int
    humans: int
    runs: list
    snapshots: list  # newest first
    bought: object  # progress.judgements_bought's, for a launched tournament asking until decided

    @classmethod
    def of(cls, tournament):
        asks_until_decided = tournament.adaptive and tournament.launched_at
        return cls(battles=tournament.battles.count(),
                   humans=HumanJudgement.objects.filter(tournament=tournament).count(),
                   runs=list(tournament.judge_runs.all()),
                   snapshots=list(tournament.snapshots.order_by("-version")),
                   bought=progress.judgements_bought(tournament=tournament) if asks_until_decided else None)


def _judged(tournament, counts):
    """Whether the crowd has judged every battle: asked them all, or, asking until decided, decided
    them all (or reached their maximum)."""
    if counts.bought is not None:
        return bool(counts.bought.units) and not counts.bought.open_units
    wanted = counts.battles * tournament.judgements_per_pair
    return bool(wanted) and counts.humans >= wanted


def _judgements_text(tournament, counts):
    if counts.bought is not None:
        accuracy = ("" if tournament.judgement_accuracy is None
                    else f", each judgement right {tournament.judgement_accuracy:g}")
        return (f"ask until decided (posterior ≥ {tournament.posterior_threshold:g}{accuracy}, up to "
                f"{tournament.judgements_per_pair} per battle): {counts.bought.summary()}")
    return (f"{counts.humans} of {counts.battles * tournament.judgements_per_pair} "
            f"({tournament.judgements_per_pair} per battle)")


def _round_text(tournament, battles):
    """Active sampling draws its battles in rounds: which one it is on, and what comes next."""
    if tournament.sampling != Tournament.Sampling.ACTIVE or not battles:
        return ""
    text = f", round {current_round(tournament)} (active sampling, at most {tournament.battle_count})"
    if battles >= tournament.battle_count:
        return text + "; every battle drawn"
    return text + "; the next round is drawn once these are answered"


def tournament_steps(tournament, *, family=None, counts=None):
    counts = counts or TournamentCounts.of(tournament)
    battles, humans, runs = counts.battles, counts.humans, counts.runs
    latest_snapshot = counts.snapshots[0] if counts.snapshots else None
    done_runs = [run for run in runs if run.status == JudgeRun.Status.DONE]
    running = [run for run in runs if run.status in (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING)]
    where = f" in “{tournament.name}”" if family is not None else ""
    tournament_link = admin_url("tournament_workflow", tournament.pk)
    steps = [
        Step("battles", "Battles sampled", "done" if battles else "todo",
             f"{plural(battles, 'battle')}{where}{_round_text(tournament, battles)}", tournament_link if family else "",
             "The tournament's workflow" if family else ""),
        Step("launched", "Tournament launched", "done" if tournament.launched_at else "todo",
             f"launched {tournament.launched_at:%Y-%m-%d %H:%M}" if tournament.launched_at else "not launched"),
        Step("human_judgements", "Human judgements",
             "done" if _judged(tournament, counts) else ("active" if tournament.launched_at else "todo"),
             _judgements_text(tournament, counts),
             admin_url("humanjudgement_changelist") + f"?tournament__id__exact={tournament.pk}", "Judgements"),
        Step("judge", "LLM judge",
             "done" if done_runs else ("active" if running else "todo"),
             (f"{plural(len(done_runs), 'run')} done" + (f", {len(running)} running" if running else ""))
             if runs else "no judge run yet",
             admin_url("judgerun_changelist") + f"?tournament__id__exact={tournament.pk}", "Judge runs"),
        Step("leaderboard", "Leaderboard",
             "done" if humans or done_runs else "todo",
             "Elo, Bradley-Terry and win-rates from the judgements so far" if humans or done_runs
             else "appears once judgements arrive",
             reverse("dashboard:leaderboard", args=[tournament.pk]), "Open the leaderboard"),
        Step("snapshot", "Snapshot",
             {Snapshot.Status.DONE: "done", Snapshot.Status.FAILED: "todo"}.get(
                 latest_snapshot.status, "active") if latest_snapshot else "todo",
             f"{latest_snapshot}: {latest_snapshot.get_status_display().lower()}" if latest_snapshot
             else "none yet",
             admin_url("snapshot_change", latest_snapshot.pk) if latest_snapshot else "",
             "Files" if latest_snapshot else ""),
    ]
    return steps


def tournament_workflow(tournament):
    family_ids = list(tournament.families.values_list("pk", flat=True))
    families = InstructionFamily.objects.filter(pk__in=family_ids) if family_ids else InstructionFamily.objects.all()
    figures = workflow_figures(families)
    response_count, models = figures.response_count, figures.models
    scope = "its families" if family_ids else "every family"
    answers = tournament_progress(tournament)
    counts = TournamentCounts.of(tournament)
    verified_count = figures.instances[Instance.Status.VERIFIED]
    steps = [
        Step("verified", "Verified instances", "done" if verified_count else "todo",
             f"{plural(verified_count, 'verified instance')} in {scope}",
             admin_url("instructionfamily_changelist"), "Families"),
        Step("predictions", "Model predictions", "done" if response_count else "todo",
             f"{plural(response_count, 'response')} from {plural(models, 'model')}"
             + (" (the verified reference takes part as one more)" if tournament.include_reference else ""),
             admin_url("modelresponse_import"), "Import predictions"),
        _answers_step(answers),
        *tournament_steps(tournament, counts=counts),
    ]
    jobs = _answer_jobs(tournament, answers) + recent_jobs(counts.runs, counts.snapshots)
    warnings = [p.key_missing for p in answers if p.key_missing and p.unresolved]
    return Workflow(title=f"Workflow of “{tournament.name}”", steps=steps,
                    next_action=_tournament_next_action(tournament, counts, response_count, answers),
                    jobs=jobs, warnings=warnings + job_warnings(jobs) + _accuracy_warnings(tournament))


def _accuracy_warnings(tournament):
    warning = stated_accuracy_warning(tournament)
    return [warning] if warning else []


def _generating(tournament, answers):
    """Answers under way: the start job or a chunk job still queued, running or retrying (calls left
    unsettled by a job that gave up are not: Generate answers is offered again, with the reason)."""
    active = (JobRecord.Status.QUEUED, JobRecord.Status.RUNNING, JobRecord.Status.RETRYING)
    jobs = JobRecord.objects.filter(status__in=active)
    chunks = Q()
    for p in answers:
        chunks |= Q(key__startswith=job_key("tasks.answer_chunk", [p.endpoint.pk]) + ":")
    return jobs.filter(Q(key=job_key("tasks.generate_answers", [tournament.pk])) | chunks).exists()


def _answers_step(answers):
    link = admin_url("endpointcall_changelist")
    if not answers:
        return Step("answers", "Answers from endpoint models (before the battles)", "skipped",
                    "no endpoint model: add one on the tournament's settings to have its answers generated")
    state = ("done" if all(p.done == p.total for p in answers)
             else "active" if any(p.in_flight for p in answers) else "todo")
    counts = "; ".join(
        f"{p.endpoint.model_name}: {p.done} of {p.total}"
        + (f", {p.failed} failed" if p.failed else "") + f", {dollars(p.cost_usd)}"
        for p in answers)
    return Step("answers", "Answers from endpoint models (before the battles)", state,
                counts + ". Battles are drawn from the answers there are, so these come first.",
                link, "Calls")


def _answer_jobs(tournament, answers):
    running = _generating(tournament, answers)
    jobs = []
    for p in answers:
        if p.done == p.total and not p.endpoint.error:
            continue
        status = ("running" if running and p.unresolved else "failed" if p.endpoint.error or p.failed
                  else "pending")
        jobs.append(Job(
            key=f"answers-{p.endpoint.pk}",
            label=f"Answers from {p.endpoint.model_name} ({p.endpoint.origin})",
            status=status, done=p.done, total=p.total,
            error=p.key_missing or p.endpoint.error,
            link=admin_url("endpointcall_changelist") + f"?endpoint__id__exact={p.endpoint.pk}"))
    return jobs


def _tournament_next_action(tournament, counts, response_count, answers):
    battles, runs, snapshot_rows = counts.battles, counts.runs, counts.snapshots
    if not battles and any(p.unresolved for p in answers):
        if _generating(tournament, answers):
            return NextAction("wait_for_answers", "See the calls",
                              "The endpoint models' answers are being generated; this page updates by "
                              "itself. The battles are sampled once they are in.",
                              url=admin_url("endpointcall_changelist"))
        return NextAction("generate_answers", "Generate answers",
                          "Asks each endpoint model for every verified instance it has no answer to, "
                          "with the instance's images, in the background. Battles are sampled after "
                          "this: they are drawn from the answers there are.")
    if not battles and not response_count:
        return NextAction("import_predictions", "Import predictions",
                          "No verified instance this tournament draws from has a model's prediction "
                          "yet. On the import page, download a family's verified sheet, add a "
                          "“<model> prediction” column per model, and import it.",
                          url=admin_url("modelresponse_import"))
    if not battles:
        return NextAction("sample_battles", "Sample battles",
                          f"Draws the battles ({tournament.get_sampling_display().lower()}) from the "
                          "verified instances and their predictions, with the tournament's seed.")
    if not tournament.launched_at:
        return NextAction("launch_tournament", f"Launch the tournament ({plural(battles, 'battle')})",
                          f"Puts every battle in the annotators' queue, "
                          f"{plural(tournament.judgements_per_pair, 'judgement')} each.")
    if not any(run.status != JudgeRun.Status.FAILED for run in runs):
        mode = JudgeRun.Mode(WORKFLOW_JUDGE_MODE)
        return NextAction("run_judge", "Run the LLM judge",
                          f"{mode.label}, model {settings.JUDGE_MODEL or '(JUDGE_MODEL is not set)'}; "
                          "both orderings of every battle. Other modes are actions of the tournament list; "
                          "another judge model, Judge runs › Add (the runs sit side by side in the judge report).")
    humans, wanted = counts.humans, battles * tournament.judgements_per_pair
    judge_running = any(run.status in (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING) for run in runs)
    leaderboard = reverse("dashboard:leaderboard", args=[tournament.pk])
    judged = _judged(tournament, counts)
    if not judged or judge_running:
        waiting_for = []
        if not judged:
            waiting_for.append(f"human judgements ({humans} of {wanted})")
        if judge_running:
            waiting_for.append("the LLM judge")
        return NextAction("wait_for_judgements", "See the leaderboard so far",
                          f"Waiting for {' and '.join(waiting_for)}; this page updates by itself.",
                          url=leaderboard)
    latest = snapshot_rows[0] if snapshot_rows else None
    if latest is None or latest.status == Snapshot.Status.FAILED:
        return NextAction("build_snapshot", "Build a snapshot",
                          "Freezes the verified benchmark and this tournament's judgements as a new "
                          "versioned snapshot (CSV, JSONL and Parquet).")
    if latest.status != Snapshot.Status.DONE:
        return NextAction("wait_for_snapshot", "See the snapshot being built",
                          f"{latest} is being built; this page updates by itself.",
                          url=admin_url("snapshot_change", latest.pk))
    return NextAction("open_snapshot", f"Download {latest}",
                      "The loop is complete. Build another snapshot after new judgements arrive.",
                      url=admin_url("snapshot_change", latest.pk))
