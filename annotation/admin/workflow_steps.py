"""What a workflow page is made of: steps, running jobs and the next action, shared by the family's
page and the tournament's."""

from dataclasses import asdict, dataclass, field
from urllib.parse import urlencode

from django.urls import reverse

from annotation.admin.worker_check import no_worker_warning
from annotation.models import (
    Instance,
    JudgeRun,
    Snapshot,
    Stage,
)
from tasks.jobs import job_key
from tasks.models import Job as JobRecord

# The judge mode the workflow's button runs; the tournament list's actions offer the other modes.


WORKFLOW_JUDGE_MODE = JudgeRun.Mode.REFERENCE_FREE
CROWD_STAGES = (Stage.INSTRUCTION_GENERATION, Stage.CAPTION, Stage.VERIFICATION)
STAGE_BUTTONS = {
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


def admin_url(name, *args):
    return reverse(f"admin:annotation_{name}", args=args)


def plural(count, word, plural=None):
    return f"{count} {word if count == 1 else (plural or word + 's')}"


# --- jobs ----------------------------------------------------------------------------------------


def _judge_jobs(runs):
    return [
        Job(key=f"judge-run-{run.pk}", label=f"LLM judge run #{run.pk}: {run.engine}, "
                                             f"{run.get_mode_display()}",
            status=run.status, done=run.done_calls, total=run.total_calls, error=run.error,
            link=admin_url("judgerun_change", run.pk))
        for run in runs
    ]


def _snapshot_jobs(snapshot_rows):
    return [
        Job(key=f"snapshot-{snapshot.pk}", label=f"{snapshot}: {snapshot.progress_message or 'building'}",
            status=snapshot.status, done=snapshot.progress, total=100, error=snapshot.error,
            link=admin_url("snapshot_change", snapshot.pk))
        for snapshot in snapshot_rows
    ]


def recent_jobs(runs, snapshot_rows):
    """Jobs still running, and those that failed, newest first: a failure stays in sight."""
    shown = [run for run in runs if run.status != JudgeRun.Status.DONE]
    shown_snapshots = [s for s in snapshot_rows if s.status != Snapshot.Status.DONE]
    return _judge_jobs(shown[:5]) + _snapshot_jobs(shown_snapshots[:3])


def collection_jobs(family, *, captioned, with_reference):
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
                        link=admin_url("instance_changelist") + "?" + urlencode(
                            {"family__id__exact": family.pk, "status__exact": Instance.Status.AWAITING_REFERENCE})))
    for record in records:
        if record.task == "tasks.create_work_units" and record.status in active:
            jobs.append(Job(key=f"job-{record.pk}", label=f"Creating the work units of {Stage(record.args[1]).label}",
                            status="running", done=0, total=0, link=admin_url("instructionfamily_change", family.pk)))
    for record in records:
        if record.status == JobRecord.Status.FAILED:
            what = (f"Reference for instance #{record.args[0]}" if record.task == "tasks.generate_reference"
                    else f"Work units of {Stage(record.args[1]).label}")
            jobs.append(Job(key=f"job-{record.pk}", label=f"{what}: failed after {plural(record.attempts, 'attempt')}",
                            status="failed", done=0, total=0, error=record.error,
                            link=reverse("admin:tasks_job_change", args=[record.pk])))
    return jobs


def job_warnings(jobs):
    # Said whatever the jobs listed: launching a stage queues a job this page does not list.
    warning = no_worker_warning()
    return [warning] if warning else []
