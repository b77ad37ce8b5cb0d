"""Publishing a study's work on its platform: the units to publish, the reward from the pay plan,
and a batch within the budget."""

import logging
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.models import Assignment, Instance, Stage, StageConfig, WorkUnit
from mturk import client as mturk_client
from mturk import pay, selectors
from mturk.exceptions import PlatformError
from mturk.models import AuditLog, CrowdStudy, Hit
from mturk.platforms import get_backend
from mturk.services import access
from mturk.services.audit import audited, log, require_researcher

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenWork:
    """The work a study's arrivals can be given now: open units of its stage, in the families it
    draws on whose stage is launched (what annotation.crowdwork.queue leases), and why there is none."""

    stage: str
    units: int
    families: int  # families drawn on
    launched: int  # of those, how many have the stage launched
    waiting_unlaunched: int  # open units in families whose stage is not launched
    only_family: str  # the study's family, when it names one

    def shortfall(self):
        """Why no arrival would get work, or "" when some would."""
        if self.units:
            return ""
        label = Stage(self.stage).label.lower()
        if not self.launched:
            where = (f"was never launched for “{self.only_family}”" if self.only_family
                     else f"is launched for none of the {self.families} families this study draws on")
            reason = f"the {label} stage {where}"
        else:
            reason = f"the {label} stage has no open units left where it is launched"
        if self.waiting_unlaunched:
            reason += f" ({self.waiting_unlaunched} open unit(s) wait where it is not launched)"
        return f"0 open units are ready for this study: {reason}, so every participant who arrives would get no work"


def open_work(study):
    families = study.families_drawn_on()
    launched = StageConfig.objects.filter(stage=study.stage, launched_at__isnull=False, family__in=families)
    units = WorkUnit.objects.filter(stage=study.stage, status=WorkUnit.Status.OPEN, family__in=families)
    ready = units.filter(family__in=launched.values("family"))
    if study.stage == Stage.PAIRWISE:
        # As annotation.crowdwork.queue: a battle is judged while its instance is verified.
        ready = ready.filter(battle__instance__status=Instance.Status.VERIFIED)
    return OpenWork(stage=study.stage, units=ready.count(), families=families.count(),
                    launched=launched.count(), only_family=study.family.name if study.family_id else "",
                    waiting_unlaunched=units.exclude(family__in=launched.values("family")).count())


def units_to_publish(study):
    units = WorkUnit.objects.filter(stage=study.stage, status=WorkUnit.Status.OPEN).exclude(
        hits__study=study)
    launched = StageConfig.objects.filter(stage=study.stage, launched_at__isnull=False)
    units = units.filter(family__in=launched.values("family")).filter(family__in=study.families_drawn_on())
    return units.annotate(
        submitted=Count("assignments", filter=Q(assignments__status=Assignment.Status.SUBMITTED))
    ).order_by("id")


def set_reward_from_plan(*, study, actor):
    """Set the study's reward from the measured median time and its target wage."""
    require_researcher(actor)
    plan = selectors.plan_for_study(study, tasks=1)
    study.reward_usd = plan.reward
    study.save(update_fields=["reward_usd"])
    return plan


@dataclass(frozen=True)
class Publication:
    """What a publish did, in the words the researcher is shown: the HITs MTurk made (each only
    once MTurk answered with its id), or the places recorded here for a study platform, to which
    nothing is sent."""

    study: CrowdStudy
    hits: list
    places: int
    sent: bool
    message: str


def publish_batch(*, study, tasks, actor, without_open_work=False):
    """Publish `tasks` more units of the study's stage (MTurk: one HIT each; CloudResearch and
    Prolific: that many more places, recorded here for the budget). Refused when it would take the
    study past its budget, and, unless `without_open_work` says the researcher chose to, when no
    open unit is ready for the participants (places opened before a stage is launched send every
    arrival away with nothing). Every call is audited, whatever MTurk answers."""
    require_researcher(actor)
    if tasks < 1:
        raise PlatformError("Publish at least one task.")
    if study.reward_usd <= 0:
        raise PlatformError("Set the reward first (the 'plan pay' action sets it from the target wage).")
    backend = get_backend(study.platform)
    committed = selectors.committed_spend(study)
    work = open_work(study)
    if not backend.publishes_per_unit:
        if work.shortfall() and not without_open_work:
            raise PlatformError(f"Nothing was recorded: {work.shortfall()}. Launch the stage first, or "
                                "tick “publish even though no work is ready” to record the places anyway.")
        return _record_places(study, backend, tasks, committed, actor, work)
    units = list(units_to_publish(study)[:tasks])
    if not units:
        raise PlatformError("No HIT was published: "
                            + (work.shortfall() or "every open unit of the stage has a HIT of this study already")
                            + ".")
    sizes = [max(1, unit.overlap - unit.submitted) for unit in units]
    costs = [pay.batch_cost(platform=study.platform, reward=study.reward_usd,
                            assignments_per_task=size, tasks=1) for size in sizes]
    check_budget(study, committed, sum(costs), per_task=max(costs))
    environment = mturk_client.environment()
    with audited(action=AuditLog.Action.PUBLISH, study=study, actor=actor, only_if_called=True,
                 request={"step": "HIT type", "environment": environment}) as step:
        hit_type_id, _ = backend.ensure_hit_type(study, study.reward_usd)
        step.response = {"HITTypeId": hit_type_id}
    hits = []
    for unit, size, cost in zip(units, sizes, costs, strict=True):
        hit, _ = Hit.objects.get_or_create(
            study=study, unit=unit,
            defaults={"hit_type_id": hit_type_id, "environment": environment,
                      "max_assignments": size, "reward_usd": study.reward_usd},
        )
        if hit.status != Hit.Status.CREATING:
            continue
        with audited(action=AuditLog.Action.PUBLISH, study=study, actor=actor, amount=cost,
                     request={"step": "HIT", "unit": unit.pk, "environment": environment}) as step:
            result = backend.create_hit(hit, study)
            created = result.response["HIT"]
            hit.hit_id = created["HITId"]
            hit.status = Hit.Status.OPEN
            hit.expires_at = created.get("Expiration") or timezone.now() + timedelta(
                hours=study.lifetime_hours)
            hit.save(update_fields=["hit_id", "status", "expires_at"])
            step.response = {"HITId": hit.hit_id, "HITTypeId": hit_type_id}
        hits.append(hit)
    message = (f"Published {len(hits)} HIT(s) on MTurk ({environment}); MTurk answered with their "
               f"HIT ids." if hits else "No HIT was published: the units were published meanwhile.")
    return Publication(study=study, hits=hits, places=0, sent=bool(hits), message=message)


def _record_places(study, backend, tasks, committed, actor, work):
    # Neither Connect's nor Prolific's API is asked to open places: the researcher opens them on
    # the platform's own site, and what is recorded here holds the budget for them.
    cost = pay.batch_cost(platform=study.platform, reward=study.reward_usd, assignments_per_task=1,
                          tasks=tasks)
    check_budget(study, committed, cost, per_task=cost / tasks)
    if backend.credential_settings:
        note = (f"Recorded here only; nothing was sent to {backend.label}: crowdbench does not "
                f"open places through its API. Open {tasks} more place(s) on {backend.label}'s "
                "own site.")
    else:
        note = "Recorded here; in-house annotators find the work on their task page."
    with transaction.atomic():
        locked = CrowdStudy.objects.select_for_update().get(pk=study.pk)
        locked.places_published += tasks
        locked.save(update_fields=["places_published"])
        log(action=AuditLog.Action.PUBLISH, study=study, actor=actor, amount=cost, sent=False,
            request={"places": tasks},
            response={"places_published": locked.places_published, "note": note})
    study.places_published = locked.places_published
    message = f"Recorded {tasks} place(s) ({locked.places_published} in all; ${cost:.2f} more committed). "
    if work.shortfall():
        message += f"Warning: {work.shortfall()}. "
    else:
        message += f"{work.units} open unit(s) of the stage are ready for its participants. "
    if not backend.credential_settings:
        return Publication(study=study, hits=[], places=tasks, sent=False, message=message + note)
    message += (f"Nothing was sent to {backend.label}: open {tasks} more place(s) on its own site "
                "(crowdbench does not open places through its API).")
    if note := access.missing_credentials_note(backend):
        message += f" {note}"
    return Publication(study=study, hits=[], places=tasks, sent=False, message=message)


def check_budget(study, committed, cost, *, per_task):
    """Refuse a batch that would take the study past its budget. `cost` comes from pay.batch_cost,
    the sum the study's pay plan shows, so the plan and this check agree."""
    if study.budget_usd is not None and study.budget_usd < 0:
        raise PlatformError(f"“{study.name}” has a negative budget (${study.budget_usd}); set one of "
                            "$0.00 or more, or none.")
    if study.budget_usd is None or committed + cost <= study.budget_usd:
        return
    room = max(Decimal("0"), study.budget_usd - committed)
    fit = int(room // per_task) if per_task else 0
    raise PlatformError(
        f"Publishing this batch (${cost:.2f}) would bring “{study.name}” to ${committed + cost:.2f}, "
        f"over its ${study.budget_usd} budget (${committed:.2f} committed); at most {fit} more "
        "task(s) fit.")
