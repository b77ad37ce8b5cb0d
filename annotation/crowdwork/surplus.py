"""Work bought beyond what a stage asked: found in a database the old caption keys left, closed,
flagged and reported.

Until migration 0012 a caption unit was keyed by the captions already in (`round-<captions + 1>`),
so once one caption of an overlap-3 unit arrived, the sweep found "round 2" missing and made it:
more captions than the overlap, and one worker could caption an instance twice. The repair runs
in that migration, on the models as they were there (`apps`); `manage.py surplus_work` reports what
it flagged. Nothing a worker submitted is deleted or left out: surplus answers stay in every
aggregate until a researcher decides otherwise.
"""

from collections import Counter, defaultdict
from dataclasses import dataclass


@dataclass
class SurplusReport:
    """What is flagged, and what a repair changed; every count is of rows, not of money."""

    surplus_units: int = 0
    surplus_units_without_answers: int = 0
    instances_with_surplus: int = 0
    surplus_answers: int = 0
    surplus_answer_workers: int = 0
    repeat_answers: int = 0
    # Set by a repair: what it changed itself.
    newly_flagged: int | None = None
    units_no_longer_owed: int = 0

    @property
    def found_anything(self):
        return bool(self.surplus_units or self.repeat_answers or self.units_no_longer_owed)

    def lines(self):
        lines = [
            f"{self.surplus_units} surplus caption unit(s) on {self.instances_with_surplus} instance(s), all "
            f"closed: {self.surplus_units_without_answers} held no answer, "
            f"{self.surplus_units - self.surplus_units_without_answers} held answers already bought",
            f"{self.surplus_answers} surplus caption(s) from {self.surplus_answer_workers} worker(s), kept, "
            "flagged by their unit's `surplus` and left in every aggregate",
            f"{self.repeat_answers} caption(s) by a worker who had already captioned the same instance",
        ]
        if self.newly_flagged is not None:
            lines += [f"this repair flagged {self.newly_flagged} of those units and closed "
                      f"{self.units_no_longer_owed} open unit(s) whose item had moved on"]
        return lines


def flagged(apps, report=None):
    """The report of what is flagged now (with a repair's own counts when it gives its report)."""
    WorkUnit = apps.get_model("annotation", "WorkUnit")
    Caption = apps.get_model("annotation", "Caption")
    report = report or SurplusReport()
    surplus = WorkUnit.objects.filter(surplus=True)
    report.surplus_units = surplus.count()
    report.surplus_units_without_answers = surplus.exclude(assignments__status="submitted").count()
    report.instances_with_surplus = surplus.values("instance_id").distinct().count()
    surplus_captions = Caption.objects.filter(assignment__unit__surplus=True)
    report.surplus_answers = surplus_captions.count()
    report.surplus_answer_workers = surplus_captions.values("author_id").distinct().count()
    seen = set()
    for instance_id, author_id in Caption.objects.filter(author__isnull=False).order_by("pk") \
            .values_list("instance_id", "author_id"):
        report.repeat_answers += (instance_id, author_id) in seen
        seen.add((instance_id, author_id))
    return report


def _round_at(starts, moment):
    """The caption round under way at `moment`: one more than the new rounds started by then."""
    return 1 + sum(1 for start in starts if start < moment)


def _count_surplus_answers_toward_their_round(apps, surplus, unit_of_round, round_of_unit):
    """A round's answers count once toward its overlap, whichever of its units they came to: its
    own unit asks only for what the surplus ones did not bring, and a round they completed ends
    (its newest caption goes to the model, as a submit that completes a unit does)."""
    WorkUnit = apps.get_model("annotation", "WorkUnit")
    Instance = apps.get_model("annotation", "Instance")
    Caption = apps.get_model("annotation", "Caption")
    Assignment = apps.get_model("annotation", "Assignment")
    if not surplus:
        return
    rounds = {(unit.instance_id, round_of_unit[unit.pk]) for unit in surplus}
    own_units = [unit_of_round[key] for key in rounds if key in unit_of_round]
    submitted = Counter(Assignment.objects.filter(unit__in=[unit.pk for unit in surplus + own_units],
                                                  status="submitted").values_list("unit_id", flat=True))
    brought = Counter()
    for unit in surplus:
        brought[unit.instance_id, round_of_unit[unit.pk]] += submitted[unit.pk]
    changed, completed = [], []
    for key, extra in brought.items():
        unit = unit_of_round.get(key)
        if unit is None or unit.status != "open" or not extra:
            continue
        own = submitted[unit.pk]
        if own + extra >= unit.overlap:
            unit.status = "done" if own else "cancelled"
            completed.append(key)
        else:
            unit.overlap -= extra
        changed.append(unit)
    WorkUnit.objects.bulk_update(changed, ["overlap", "status"], batch_size=1000)
    Assignment.objects.filter(unit__in=[unit.pk for unit in changed if unit.status != "open"],
                              status="leased").update(status="returned")
    waiting = {instance.pk: instance for instance in Instance.objects.filter(
        pk__in=[instance_id for instance_id, _ in completed], status="awaiting_caption")}
    moved_on = []
    for instance_id, round_number in completed:
        instance = waiting.get(instance_id)
        newest = Caption.objects.filter(instance_id=instance_id, round=round_number) \
            .order_by("-created_at", "-pk").first()
        if instance is None or instance.caption_round != round_number or newest is None:
            continue
        # The sweep queues its reference: updated_at is left as it was, so it is owed at once.
        instance.current_caption_id, instance.status = newest.pk, "awaiting_reference"
        moved_on.append(instance)
    Instance.objects.bulk_update(moved_on, ["current_caption", "status"], batch_size=1000)


def repair(apps):
    """Re-key caption units by the round they were made for, close the surplus ones and the open
    units no longer owed, and say what was found. Idempotent: a repaired database finds nothing
    new. Written in bulk: a campaign's database has a caption unit per instance."""
    WorkUnit = apps.get_model("annotation", "WorkUnit")
    Instance = apps.get_model("annotation", "Instance")
    Caption = apps.get_model("annotation", "Caption")
    Reference = apps.get_model("annotation", "Reference")
    Assignment = apps.get_model("annotation", "Assignment")

    # A new round starts when verification blames a reference's caption and sends the instance back
    # for a new one; the last blame of an instance that ended discarded started none.
    starts = defaultdict(list)
    blamed = Reference.objects.filter(verdict="incorrect", problem_in_caption=True, decided_at__isnull=False) \
        .order_by("decided_at").values_list("instance_id", "decided_at", "instance__status")
    last_blame = {}
    for instance_id, decided, status in blamed:
        starts[instance_id].append(decided)
        last_blame[instance_id] = status
    for instance_id, status in last_blame.items():
        if status == "discarded":
            starts[instance_id].pop()

    units = defaultdict(list)
    for unit in WorkUnit.objects.filter(stage="caption", instance__isnull=False, surplus=False) \
            .only("pk", "key", "instance_id", "created_at", "overlap", "status").order_by("created_at", "pk"):
        units[unit.instance_id].append(unit)
    round_of_unit, surplus, renamed, unit_of_round = {}, [], [], {}
    for instance_id, its_units in units.items():
        last_round = 0
        for unit in its_units:
            round_number = _round_at(starts[instance_id], unit.created_at)
            round_of_unit[unit.pk] = round_number
            if round_number == last_round:
                unit.key, unit.surplus, unit.status = f"{unit.key}-surplus-{unit.pk}", True, "cancelled"
                surplus.append(unit)
                continue
            last_round = round_number
            unit_of_round[instance_id, round_number] = unit
            key = f"instance-{instance_id}-round-{round_number}"
            if unit.key != key:
                unit.key = key
                renamed.append(unit)
    # Two steps, so no new key meets an old one still in place.
    moved = surplus + renamed
    final_keys = [unit.key for unit in moved]
    for unit in moved:
        unit.key = f"repairing-{unit.pk}"
    WorkUnit.objects.bulk_update(moved, ["key"], batch_size=1000)
    for unit, key in zip(moved, final_keys, strict=True):
        unit.key = key
    WorkUnit.objects.bulk_update(renamed, ["key"], batch_size=1000)
    WorkUnit.objects.bulk_update(surplus, ["key", "surplus", "status"], batch_size=1000)
    Assignment.objects.filter(unit__in=[unit.pk for unit in surplus], status="leased").update(status="returned")

    instances = []
    for instance in Instance.objects.filter(pk__in=list(units) + list(starts)).only("pk", "caption_round"):
        caption_round = max(1 + len(starts[instance.pk]), *(round_of_unit[unit.pk] for unit in units[instance.pk]))
        if caption_round != instance.caption_round:
            instance.caption_round = caption_round
            instances.append(instance)
    Instance.objects.bulk_update(instances, ["caption_round"], batch_size=1000)

    # A caption's round is its unit's (a caption from a researcher or an import: the round under way).
    captions = []
    for pk, instance_id, created, old_round, unit_id in Caption.objects.values_list(
            "pk", "instance_id", "created_at", "round", "assignment__unit_id"):
        round_number = round_of_unit.get(unit_id) or _round_at(starts[instance_id], created)
        if round_number != old_round:
            captions.append(Caption(pk=pk, round=round_number))
    Caption.objects.bulk_update(captions, ["round"], batch_size=1000)
    _count_surplus_answers_toward_their_round(apps, surplus, unit_of_round, round_of_unit)

    # Open units whose item has moved on ask for answers nobody will use.
    no_longer_owed = (
        WorkUnit.objects.filter(status="open", stage="caption")
        .exclude(instance__status="awaiting_caption")
        | WorkUnit.objects.filter(status="open", stage="verification")
        .exclude(reference__verdict="pending", instance__status="awaiting_verification")
    )
    closed = WorkUnit.objects.filter(pk__in=no_longer_owed.values("pk")).update(status="cancelled")
    return flagged(apps, SurplusReport(newly_flagged=len(surplus), units_no_longer_owed=closed))
