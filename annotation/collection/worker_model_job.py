"""The worker-model job (`tasks.fit_worker_models`): a worker model decides the verification
references waiting for it, and revises what a later fit decides otherwise.

A model decides only on evidence (`model_decision`): its label counts when every verifier of the
reference has enough counted answers in the fit (the stage's `model_min_answers`, or a known
accuracy on gold items) and its posterior reaches the stage's `model_min_posterior`; below that
the verification rule decides from the votes. A label that contradicts every counted vote is never
applied silently: the reference is held for a reviewer (`Reference.held_for_review`), who
adjudicates.

A model's decision stays revisable until a snapshot publishes its instance: each run fits again
and, where the evidence now decides otherwise, reopens and decides the reference again, recording
the change (`DecisionChange`, before and after). What a snapshot published stands, as does a
decision something was built on (`reopen_decision`). So the job is idempotent: run twice on the
same answers, it decides and changes nothing the second time. A fit that saw a different set of a
reference's counted answers than the database holds (an answer came in or was rejected meanwhile)
leaves the reference for the next run, so no decision rests on answers that no longer count.

It decides in bulk (issue 41): one fit, then the waiting references BATCH at a time, each batch
locked in one statement per table (instances, then references, in id order, the order a submit
takes them in) and decided with a handful of statements (`annotation.sql.update_rows`), where it
had spent about 25 statements, 50 to 170 ms, a reference deciding them one by one. A reference
decides exactly as `decide_reference` would (`mark_decided` sets its fields for both) and its
instance is settled as `_settle_instance` would; what is rare or order-dependent goes through those
functions one at a time as before: an instance with more than one candidate waiting, a new caption
round. Revising reads every revisable decision and its votes at once, and locks and reopens only
those the fit now decides otherwise.
"""

from collections import Counter
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.collection.verification import (
    DECIDED_FIELDS,
    DecisionStands,
    asks_new_caption,
    begin_new_caption_round,
    counted_votes,
    decide_reference,
    mark_decided,
    reopen_decision,
    verdict_by_votes,
    votes_complete,
)
from annotation.crowdwork.lock_order import lock_item
from annotation.crowdwork.stages import create_work_units, stage_config
from annotation.exceptions import AnnotationError
from annotation.models import (
    Aggregation,
    Battle,
    DecisionChange,
    Instance,
    Reference,
    Snapshot,
    Stage,
    StageConfig,
    Verification,
    WorkerQualification,
    WorkUnit,
    counted_verifications,
)
from annotation.sql import update_rows
from crowdbench.jobs import enqueue

BATCH = 2000
VOTE_COLUMNS = ("reference_id", "worker_id", "is_correct", "problem_in_caption", "problem_in_response", "is_harmful")


def awaiting_worker_model(*, family=None):
    """Pending references of families whose verification stage decides by a worker model, whose
    counted answers are all in and which no reviewer holds (the job decides them). Read in a few
    queries whatever their number, with the columns the job and the sweep read (and `family_id`)."""
    families = StageConfig.objects.filter(stage=Stage.VERIFICATION).exclude(aggregation=Aggregation.VOTES)
    pending = (Reference.objects.filter(verdict=Reference.Verdict.PENDING, held_for_review="",
                                        instance__status=Instance.Status.AWAITING_VERIFICATION,
                                        instance__family__in=families.values("family_id"))
               .annotate(family_id=F("instance__family_id")).only("id", "instance_id", "created_at").order_by("pk"))
    if family is not None:
        pending = pending.filter(instance__family=family)
    waiting = list(pending)
    configs = verification_configs({reference.family_id for reference in waiting})
    # Read through the same query, not a list of ids: tens of thousands of ids make a long statement.
    votes = counted_votes_of(pending.values("pk"))
    units = {}
    for unit in (WorkUnit.objects.filter(stage=Stage.VERIFICATION, reference__in=pending.values("pk"))
                 .only("id", "reference_id", "overlap").order_by("pk")):
        units.setdefault(unit.reference_id, unit)
    return [reference for reference in waiting
            if votes_complete(votes.get(reference.pk, []), configs[reference.family_id], units.get(reference.pk))]


def verification_configs(family_ids):
    """{family id: its verification stage's settings}, made with their defaults where missing, as
    `stage_config` does."""
    found = {config.family_id: config
             for config in StageConfig.objects.filter(stage=Stage.VERIFICATION, family_id__in=family_ids)}
    for family_id in sorted(set(family_ids) - set(found)):
        found[family_id] = StageConfig.objects.get_or_create(family_id=family_id, stage=Stage.VERIFICATION)[0]
    return found


def counted_votes_of(references):
    """{reference id: its counted votes in order} of `references` (ids, or a query of them), as
    `counted_votes` reads one reference's under its family's settings (`counted_verifications` is
    that rule over every family at once). Each vote is a row of the columns deciding reads."""
    votes = {}
    for vote in (Verification.objects.filter(counted_verifications(), reference__in=references).order_by("pk")
                 .values_list(*VOTE_COLUMNS, named=True)):
        votes.setdefault(vote.reference_id, []).append(vote)
    return votes


def revisable_by_worker_models():
    """References a worker model decided that a later fit may still revise: not adjudicated, and
    whose instance no finished snapshot has published."""
    published = set()
    for digests in Snapshot.objects.filter(status=Snapshot.Status.DONE).values_list("instance_digests", flat=True):
        published.update(int(instance_id) for instance_id in digests)
    models = [value for value in Aggregation.values if value != Aggregation.VOTES]
    return (Reference.objects.filter(decided_by__in=models, adjudicated_by__isnull=True,
                                     verdict__in=[Reference.Verdict.CORRECT, Reference.Verdict.INCORRECT])
            .exclude(instance_id__in=published).annotate(family_id=F("instance__family_id"))
            .only("id", "instance_id", "verdict", "decided_by").order_by("pk"))


@dataclass(frozen=True)
class ModelDecision:
    """What the evidence decides for a reference under a worker model: `by` a model (its label and
    posterior), by the votes (the model's evidence is too thin), or held for a reviewer (`held`, why)."""

    by: str
    is_correct: bool | None = None
    posterior: float | None = None
    held: str = ""


def model_decision(*, fit, votes, config, known_accuracy=frozenset()):
    """Decide from a fit only on evidence (see the module's docstring). `known_accuracy`: workers
    whose accuracy on gold items is known."""
    label, posterior = fit.label_of(votes[0].reference_id)
    is_correct = label == "correct"
    model_name = Reference.DecidedBy(fit.model).label
    if all(vote.is_correct != is_correct for vote in votes):
        said = "correct" if is_correct else "incorrect"
        return ModelDecision(by=Reference.DecidedBy.REVIEWER, held=(
            f"{model_name} says {said} (posterior {posterior:.2f}) where every counted vote "
            f"({len(votes)}) says the opposite."))
    thin = [vote.worker_id for vote in votes
            if fit.answers_of(vote.worker_id) < config.model_min_answers and vote.worker_id not in known_accuracy]
    if thin or posterior < config.model_min_posterior:
        return ModelDecision(by=Aggregation.VOTES)
    return ModelDecision(by=fit.model, is_correct=is_correct, posterior=posterior)


def decide_by_worker_models():
    """The job's work: fit every label model a verification stage uses (and Dawid-Skene always,
    whose reliabilities the researcher pages show) on every counted verification answer, store
    each worker's reliability, decide the references waiting for a model, and revise what a later
    fit decides otherwise. Returns how many references it decided."""
    # pandas and crowd-kit load here, in the job, and stay out of the web workers that submit.
    from annotation import worker_models

    frame = worker_models.verification_frame()
    in_use = set(StageConfig.objects.filter(stage=Stage.VERIFICATION).exclude(aggregation=Aggregation.VOTES)
                 .values_list("aggregation", flat=True))
    fits = {}
    if not frame.empty:
        for model in sorted(in_use | {Aggregation.DAWID_SKENE}):
            fit = worker_models.fit_labels(frame, model)
            worker_models.store_reliabilities(stage=Stage.VERIFICATION, model=model, reliability=fit.reliability,
                                              answers=fit.answers)
            fits[model] = fit
    known = workers_of_known_accuracy()
    decided = decide_waiting(fits, known)
    revise_stale(fits, known)
    return decided


def workers_of_known_accuracy():
    return frozenset(WorkerQualification.objects.filter(qualification__stage=Stage.VERIFICATION,
                                                        live_accuracy__isnull=False)
                     .values_list("worker_id", flat=True))


def decide_one(waiting, fits, known):
    """Decide one waiting reference from `fits`, locking it. Returns 1 when decided."""
    with transaction.atomic():
        lock_item(stage=Stage.VERIFICATION, instance_id=waiting.instance_id, reference_id=waiting.pk)
        reference = Reference.objects.get(pk=waiting.pk)
        if reference.verdict != Reference.Verdict.PENDING or reference.held_for_review:
            return 0
        config = stage_config(family=waiting.instance.family, stage=Stage.VERIFICATION)
        votes = _votes_the_fit_saw(fits.get(config.aggregation), reference, config)
        if votes is None:
            return 0
        return _apply(reference, model_decision(fit=fits[config.aggregation], votes=votes, config=config,
                                                known_accuracy=known))


def _votes_the_fit_saw(fit, reference, config):
    """The reference's counted votes when `fit` saw exactly these, else None (wait for the next fit)."""
    votes = counted_votes(reference, config)
    if fit is None or not votes or fit.voters_of(reference.pk) != frozenset(vote.worker_id for vote in votes):
        return None
    return votes


def _apply(reference, decision):
    """Decide a pending reference as `decision` says, or hold it for a reviewer. Returns 1 when decided."""
    if decision.held:
        reference.held_for_review = decision.held
        reference.save(update_fields=["held_for_review"])
        return 0
    if decision.by == Aggregation.VOTES:
        decide_reference(reference=reference)
    else:
        decide_reference(reference=reference, by=decision.by, is_correct=decision.is_correct,
                         posterior=decision.posterior)
    return 1


def revise_decision(stale, fits, known):
    """Decide again a model's decision the latest fit disagrees with, when nothing published or built
    on it stops that; record the change (before and after) either way. Returns the DecisionChange
    or None when the evidence still decides as before."""
    _, reference = lock_item(stage=Stage.VERIFICATION, instance_id=stale.instance_id, reference_id=stale.pk)
    if reference.decided_by != stale.decided_by or reference.verdict != stale.verdict:
        return None
    config = stage_config(family=stale.instance.family, stage=Stage.VERIFICATION)
    fit = fits.get(reference.decided_by)
    votes = _votes_the_fit_saw(fit, reference, config)
    if votes is None:
        return None
    decision = model_decision(fit=fit, votes=votes, config=config, known_accuracy=known)
    after = verdict_after(reference, decision, votes, config)
    if after is None:
        return None
    change = DecisionChange(reference=reference, model=reference.decided_by, before=reference.verdict, after=after,
                            posterior_before=reference.posterior, posterior_after=decision.posterior)
    instance = Instance.objects.select_related("family").get(pk=reference.instance_id)
    try:
        reopen_decision(reference=reference, instance=instance)
    except DecisionStands as stands:
        if reference.decision_changes.filter(applied=False, before=change.before, after=change.after).exists():
            return None  # recorded at an earlier run; the decision still stands
        change.applied, change.note = False, str(stands)[:300]
        change.save()
        return change
    reference.refresh_from_db()
    _apply(reference, decision)
    change.applied = True
    change.note = decision.held[:300] if decision.held else ""
    change.save()
    return change


def verdict_after(reference, decision, votes, config):
    """The verdict `decision` gives a reference a model decided, or None when it is the one it
    has: pending when it is held for a reviewer, else the label that now decides."""
    is_correct = reference.verdict == Reference.Verdict.CORRECT
    if decision.held:
        return Reference.Verdict.PENDING
    now = verdict_by_votes(votes, config) if decision.by == Aggregation.VOTES else decision.is_correct
    if now == is_correct:
        return None
    return Reference.Verdict.CORRECT if now else Reference.Verdict.INCORRECT


# --- in bulk --------------------------------------------------------------------------------------


def decide_waiting(fits, known):
    """Decide every reference waiting for a model. Returns how many were decided."""
    waiting = awaiting_worker_model()
    candidates = Counter(reference.instance_id for reference in waiting)
    alone = [reference for reference in waiting if candidates[reference.instance_id] == 1]
    decided = sum(_decide_batch(alone[start:start + BATCH], fits, known) for start in range(0, len(alone), BATCH))
    # Candidates of one instance settle it in turn, each seeing what the one before did.
    for reference in waiting:
        if candidates[reference.instance_id] > 1:
            decided += decide_one(reference, fits, known)
    return decided


def _decide_batch(batch, fits, known):
    with transaction.atomic():
        instances = {instance.pk: instance for instance in Instance.objects.select_for_update(of=("self",))
                     .select_related("family").filter(pk__in=[reference.instance_id for reference in batch])
                     .order_by("pk")}
        references = [reference for reference in Reference.objects.select_for_update()
                      .filter(pk__in=[reference.pk for reference in batch]).order_by("pk")
                      if reference.verdict == Reference.Verdict.PENDING and not reference.held_for_review]
        configs = verification_configs({instance.family_id for instance in instances.values()})
        votes = counted_votes_of([reference.pk for reference in references])
        held, decided = [], []
        for reference in references:
            config = configs[instances[reference.instance_id].family_id]
            fit, seen = fits.get(config.aggregation), votes.get(reference.pk, [])
            if not _saw(fit, reference.pk, seen):
                continue
            decision = model_decision(fit=fit, votes=seen, config=config, known_accuracy=known)
            if decision.held:
                reference.held_for_review = decision.held
                held.append(reference)
                continue
            mark_decided(reference, seen, config, by=decision.by, is_correct=decision.is_correct,
                         posterior=decision.posterior)
            decided.append(reference)
        update_rows(Reference, held, ["held_for_review"])
        update_rows(Reference, decided, DECIDED_FIELDS)
        _settle_instances(decided, instances, configs)
    return len(decided)


def _settle_instances(references, instances, configs):
    """What `_settle_instance` does for each decided reference, in bulk: a correct one verifies its
    instance, an incorrect one discards it or asks for a new caption; the instance's open
    verification units close either way."""
    now = timezone.now()
    WorkUnit.objects.filter(stage=Stage.VERIFICATION, status=WorkUnit.Status.OPEN,
                            instance_id__in=[reference.instance_id for reference in references]) \
        .update(status=WorkUnit.Status.CANCELLED)
    verified, discarded = [], []
    for reference in references:
        instance = instances[reference.instance_id]
        if reference.verdict == Reference.Verdict.CORRECT:
            if not instance.reference_output.strip():
                instance.reference_output = reference.text
            if not instance.reference_output.strip():
                raise AnnotationError(f"Instance #{instance.pk} has no correct reference to be verified with.")
            instance.status, instance.updated_at = Instance.Status.VERIFIED, now
            verified.append(instance)
        elif asks_new_caption(instance=instance, reference=reference, config=configs[instance.family_id]):
            begin_new_caption_round(instance)
        else:
            instance.status, instance.updated_at = Instance.Status.DISCARDED, now
            discarded.append(instance)
    update_rows(Instance, verified, ["status", "reference_output", "updated_at"])
    update_rows(Instance, discarded, ["status", "updated_at"])
    tournaments = set(Battle.objects.filter(instance__in=verified).order_by().values_list("tournament_id", flat=True))
    for tournament_id in sorted(tournaments):
        enqueue("tasks.refresh_leaderboard", tournament_id)
    # Their replacements are asked for at once, not when the sweep next looks.
    for family in sorted({instance.family for instance in discarded}, key=lambda family: family.pk):
        create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION)


def revise_stale(fits, known):
    """Revise every decision a model made that the latest fit decides otherwise; the others are read
    and left alone. Returns the DecisionChanges recorded."""
    revisable = revisable_by_worker_models()
    stale = list(revisable)
    configs = verification_configs({reference.family_id for reference in stale})
    votes = counted_votes_of(revisable.values("pk"))
    changes = []
    for reference in stale:
        config = configs[reference.family_id]
        fit, seen = fits.get(reference.decided_by), votes.get(reference.pk, [])
        if not _saw(fit, reference.pk, seen):
            continue
        decision = model_decision(fit=fit, votes=seen, config=config, known_accuracy=known)
        if verdict_after(reference, decision, seen, config) is None:
            continue
        with transaction.atomic():
            if change := revise_decision(reference, fits, known):
                changes.append(change)
    return changes


def _saw(fit, reference_id, votes):
    return fit is not None and bool(votes) and fit.voters_of(reference_id) == frozenset(
        vote.worker_id for vote in votes)
