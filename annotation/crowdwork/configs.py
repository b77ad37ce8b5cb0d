"""A stage's settings reach the work already out: a changed overlap, lease or agreement rule applies
to the stage's open units and leases, and the researcher is told how many it changed."""

from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Least
from django.utils import timezone

from annotation.collection.verification import WORKER_MODEL_JOB
from annotation.collection.waiting import settle_family
from annotation.crowdwork.decisions import settle_again
from annotation.crowdwork.lock_order import lock_unit_and_item
from annotation.crowdwork.stopping import ask_what_is_needed
from annotation.models import Aggregation, Assignment, Instance, Reference, Stage, StageConfig, WorkUnit
from crowdbench.jobs import enqueue

APPLIED_FIELDS = ("overlap", "lease_minutes", "verification_rule", "counts_provisional", "adaptive",
                  "agree_to_decide", "stopping", "posterior_threshold", "prior_accuracy", "aggregation",
                  "model_min_answers", "model_min_posterior")
# What a worker model's decisions rest on: a change is fitted and decided again in its job.
MODEL_FIELDS = {"aggregation", "model_min_answers", "model_min_posterior"}
# What changes how many answers a unit asks (a weighed rule reads a worker's accuracy from the
# worker model once it has `model_min_answers` of their answers, so it asks only under one).
ASKING_FIELDS = {"overlap", "adaptive", "agree_to_decide", "stopping", "posterior_threshold", "prior_accuracy",
                 "model_min_answers"}


def _asking(changed, config, before):
    """The changed settings that change how many answers a unit asks, before or after the change."""
    weighed = any(settings["adaptive"] and settings["stopping"] in StageConfig.WEIGHED_STOPPING
                  for settings in (before, {"adaptive": config.adaptive, "stopping": config.stopping}))
    return changed & ASKING_FIELDS - (set() if weighed else {"model_min_answers"})


@dataclass
class Applied:
    """What a change of settings did to the work already out."""

    units_resized: int = 0
    units_completed: int = 0
    decided: int = 0
    units_reopened: int = 0
    units_made: int = 0
    leases_shortened: int = 0
    pending_decisions: int = 0
    rule_changed: bool = False
    aggregation: str = ""
    refitted: bool = False

    def message(self):
        parts = []
        if self.units_resized:
            parts.append(f"{self.units_resized} open task(s) now ask for the new number of answers")
        if self.units_completed:
            parts.append(f"{self.units_completed} of them already had enough and are done")
        if self.decided:
            parts.append(f"{self.decided} decision(s) made")
        if self.leases_shortened:
            parts.append(f"{self.leases_shortened} lease(s) held now end at the new lease length")
        if self.units_reopened:
            parts.append(f"{self.units_reopened} task(s) back in the queue: their answers no longer suffice")
        if self.units_made:
            parts.append(f"{self.units_made} new task(s) made")
        # A worker model fitted again revises a decision of its own the new fit disagrees with
        # (annotation/collection/worker_model_job.py), so only without one do decisions stand.
        kept = ("the worker model is fitted again, and a decision of its own that the new fit disagrees with is "
                "revised where nothing published rests on it (each change is listed under Decision changes)"
                if self.refitted else "those decided already keep their decision")
        if self.rule_changed or self.aggregation:
            rule = f"by {self.aggregation}" if self.aggregation else "by the new rule"
            parts.append(f"{self.pending_decisions} reference(s) still undecided will be decided {rule} as their "
                         f"answers come in; {kept}" if self.pending_decisions else
                         f"references will be decided {rule} as their answers come in; {kept}")
        elif self.refitted:
            parts.append(kept)
        said = "; ".join(parts) + "." if parts else "No open task needed changing."
        return said[0].upper() + said[1:]


def apply_stage_config(*, config, before):
    """Apply `config`'s saved settings to its stage's open units; `before` holds the values the
    researcher changed from (a dict of APPLIED_FIELDS). Returns what it changed."""
    applied = Applied()
    changed = {name for name in APPLIED_FIELDS if before.get(name) != getattr(config, name)}
    if not changed or config.stage == Stage.PAIRWISE:
        # A tournament says how many judge each battle (preferences/tournaments.py).
        return applied
    asking = _asking(changed, config, before)
    now = timezone.now()
    with transaction.atomic():
        units = WorkUnit.objects.filter(family=config.family, stage=config.stage, status=WorkUnit.Status.OPEN,
                                        surplus=False)
        if asking and config.stage != Stage.INSTRUCTION_GENERATION:
            if config.adaptive:
                # Each open unit asks what its answers in need now, under the new rule.
                for unit in units:
                    # Item first, as every submit locks them (annotation/crowdwork/lock_order.py).
                    unit = lock_unit_and_item(unit)
                    before_overlap = unit.overlap
                    applied.units_resized += ask_what_is_needed(unit) != before_overlap
            else:
                applied.units_resized = units.exclude(overlap=config.overlap).update(overlap=config.overlap)
        if asking or "counts_provisional" in changed:
            for unit in units.select_related("family"):
                completed, decided = settle_again(unit)
                applied.units_completed += completed
                applied.decided += decided
        if "lease_minutes" in changed:
            longest = F("leased_at") + timedelta(minutes=config.lease_minutes)
            applied.leases_shortened = Assignment.objects.filter(
                Q(lease_expires_at__gt=now) & Q(lease_expires_at__gt=longest),
                unit__family=config.family, unit__stage=config.stage, status=Assignment.Status.LEASED,
            ).update(lease_expires_at=Least(F("lease_expires_at"), longest))
        # Every undecided item is asked again under the new settings, done units too: answers that
        # now suffice decide, units whose answers no longer suffice reopen, missing units are made.
        settled = settle_family(config.family, rule_changed_of=config.stage if asking else None)
        applied.decided += settled.decided
        applied.units_reopened += settled.units_reopened
        applied.units_made += settled.units_made
        if (asking - {"overlap"} or "verification_rule" in changed) and config.stage == Stage.VERIFICATION:
            applied.rule_changed = True
        if "aggregation" in changed and config.stage == Stage.VERIFICATION:
            applied.aggregation = config.get_aggregation_display()
        if changed & MODEL_FIELDS and config.stage == Stage.VERIFICATION and config.aggregation != Aggregation.VOTES:
            enqueue(WORKER_MODEL_JOB)
            applied.refitted = True
        if config.stage == Stage.VERIFICATION:
            applied.pending_decisions = Reference.objects.filter(
                instance__family=config.family, verdict=Reference.Verdict.PENDING,
                instance__status=Instance.Status.AWAITING_VERIFICATION).count()
    return applied
