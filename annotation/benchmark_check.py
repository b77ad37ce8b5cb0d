"""Every way the benchmark could be wrong, looked for in any database (`manage.py check_benchmark`).

Each rule here is one the collection services keep by construction (annotation/models/benchmark.py,
annotation/collection/waiting.py, the worker-model job): the check reads the rows those services
wrote and names every instance where one does not hold, so a fault in a path nobody listed shows
up the day it happens. The owed-work property test runs it after every step of its random
histories; CI runs it on the demo world.
"""

import csv
import io
from dataclasses import dataclass

from annotation.collection.verification import counted_votes
from annotation.collection.waiting import waits_for
from annotation.models import (
    Aggregation,
    Instance,
    InstructionFamily,
    Reference,
    Snapshot,
    Stage,
    StageConfig,
    WorkState,
)
from annotation.models.benchmark import benchmark_instances, benchmark_references

MODELS = [value for value in Aggregation.values if value != Aggregation.VOTES]


@dataclass(frozen=True, order=True)
class Violation:
    instance_id: int
    what: str

    def __str__(self):
        return f"instance #{self.instance_id}: {self.what}"


def violations(*, families=None, snapshots=True):
    """Every violation in the database (of `families`, when given), by instance id."""
    families = InstructionFamily.objects.all() if families is None else families
    found = []
    for family in families.order_by("pk"):
        found += _decisions_without_evidence(family)
        found += _verified_on_rejected_work(family)
        found += _without_a_next_step(family)
    if snapshots:
        found += _rows_without_a_reference_in_snapshots()
    return sorted(set(found))


def _decisions_without_evidence(family):
    """Decided references that rest on rejected votes only, or that a worker model decided against
    every counted vote with no reviewer told."""
    found = []
    # Read, never made: a family without the stage's settings counts votes as their defaults say.
    config = (StageConfig.objects.filter(family=family, stage=Stage.VERIFICATION).first()
              or StageConfig(family=family, stage=Stage.VERIFICATION))
    decided = (Reference.objects.filter(instance__family=family, decided_by__in=[Aggregation.VOTES, *MODELS],
                                        verdict__in=[Reference.Verdict.CORRECT, Reference.Verdict.INCORRECT])
               .exclude(instance__status=Instance.Status.DISCARDED).order_by("pk"))
    for reference in decided:
        votes = counted_votes(reference, config)
        is_correct = reference.verdict == Reference.Verdict.CORRECT
        # A decision made while provisional answers counted keeps them when the stage later counts only
        # accepted ones (it stands, as under a changed rule); one whose every vote was rejected does not.
        if not reference.verifications.exclude(assignment__work_state=WorkState.REJECTED).exists():
            found.append(Violation(reference.instance_id, f"reference #{reference.pk} is decided "
                                   f"{reference.verdict} on no vote that was not rejected"))
        elif votes and reference.decided_by in MODELS and all(vote.is_correct != is_correct for vote in votes):
            found.append(Violation(reference.instance_id, (
                f"reference #{reference.pk} was decided {reference.verdict} by {reference.get_decided_by_display()} "
                f"against every counted vote ({len(votes)}), with no reviewer")))
    return found


def _verified_on_rejected_work(family):
    """Instances the benchmark would hold, or verified ones, that rest on a rejected answer: a
    rejected caption, a rejected instruction, or a verified reference whose caption was rejected."""
    found = []
    verified = family.instances.filter(status=Instance.Status.VERIFIED).select_related(
        "current_caption__assignment", "instruction_submission__assignment")
    for instance in verified:
        caption = instance.current_caption
        if caption is not None and caption.assignment is not None and \
                caption.assignment.work_state == WorkState.REJECTED:
            found.append(Violation(instance.pk, f"verified on caption #{caption.pk}, which was rejected"))
        submission = getattr(instance, "instruction_submission", None)
        if submission is not None and submission.assignment.work_state == WorkState.REJECTED:
            found.append(Violation(instance.pk, "verified, but its instruction was rejected"))
    in_benchmark = benchmark_instances().filter(family=family)
    resting = benchmark_references().filter(instance__in=in_benchmark, verdict=Reference.Verdict.CORRECT,
                                            caption__assignment__work_state=WorkState.REJECTED)
    for reference in resting:
        found.append(Violation(reference.instance_id, f"its verified reference #{reference.pk} was written from "
                                                      "a rejected caption"))
    return found


def _without_a_next_step(family):
    waits = waits_for(family)
    found = [Violation(pk, "undecided, and nothing anyone or any job will do moves it (no next step)")
             for pk in waits.stuck]
    if waits.slots_missing:
        first = family.instances.order_by("pk").values_list("pk", flat=True).first() or 0
        found.append(Violation(first, f"family #{family.pk} “{family.name}” asks for {waits.slots_missing} more "
                                      "instance(s) than its live instances and open tasks can bring"))
    return found


def _rows_without_a_reference_in_snapshots():
    """Rows of a built snapshot's sheets that hold no verified reference: a discarded or undecided
    instance in a file that says it holds verified instances only."""
    # Imported here: the snapshot module reaches the storage, which a check of rows alone never needs.
    from annotation.datasets.snapshots import open_snapshot_file

    found = []
    for snapshot in Snapshot.objects.filter(status=Snapshot.Status.DONE).order_by("version"):
        for entry in snapshot.files:
            if not entry.get("name", "").endswith(".csv") or "path" not in entry:
                continue
            try:
                with open_snapshot_file(snapshot=snapshot, name=entry["name"]) as stored:
                    rows = csv.DictReader(io.TextIOWrapper(stored, encoding="utf-8", newline=""))
                    if "reference_output" not in (rows.fieldnames or []):
                        continue
                    for number, row in enumerate(rows, start=2):
                        if not (row.get("reference_output") or "").strip():
                            found.append(Violation(
                                int(row.get("instance_id") or 0),
                                f"snapshot v{snapshot.version} {entry['name']} row {number} has no reference_output"))
            except Exception as error:  # noqa: BLE001 - a file that cannot be read is itself a finding
                found.append(Violation(0, f"snapshot v{snapshot.version} {entry['name']} cannot be read: {error}"))
    return found

