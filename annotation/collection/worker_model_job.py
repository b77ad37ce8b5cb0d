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

It decides in bulk (issue 41): one fit, then, from the answers the fit saw (`seen_votes`: no
answer is read twice), the references whose answers are all in, BATCH at a time, each batch locked
in one statement per table (instances, then references, in id order: the lock order of
annotation/crowdwork/lock_order.py), its votes read again under the lock, and decided with a
handful of statements (`annotation.sql.update_rows`), where it had spent about 25 statements, 50 to
170 ms, a reference deciding them one by one. Its rows are read as tuples, not model objects, and
ids are sent as one array (`annotation.sql.Among`), so the statements do not grow with the
references and Python does little per reference. A reference decides exactly as
`decide_reference` would (`mark_decided` sets its fields for both) and its instance is settled as
`_settle_instance` would; what is rare or order-dependent goes through those functions one at a
time as before: an instance with more than one candidate waiting, a new caption round. Revising
reads every revisable decision at once (not those this run made, from the same fits), judges it on
the answers the fit saw, and locks, reads again and reopens only those the fit now decides
otherwise.
"""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

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
from annotation.collection.worker_model_reads import (
    awaiting_worker_model,
    counted_votes_of,
    first_units,
    revisable_by_worker_models,
    seen_votes,
    verification_configs,
    waiting_for_a_model,
    workers_of_known_accuracy,
)
from annotation.crowdwork.lock_order import lock_item
from annotation.crowdwork.stages import create_work_units, stage_config
from annotation.exceptions import AnnotationError
from annotation.models import (
    Aggregation,
    Battle,
    DecisionChange,
    Instance,
    InstructionFamily,
    Reference,
    Stage,
    StageConfig,
    WorkUnit,
)
from annotation.sql import Among, update_rows
from crowdbench.jobs import enqueue

BATCH = 10000


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
                                              answers=fit.answers, by_truth=fit.by_truth, shares=fit.shares)
            fits[model] = fit
    known, seen = workers_of_known_accuracy(), seen_votes(frame)
    started = timezone.now()
    decided = decide_waiting(fits, known, seen)
    revise_stale(fits, known, seen=seen, decided_before=started)
    return decided


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


def decide_waiting(fits, known, seen=None):
    """Decide every reference waiting for a model. Returns how many were decided. `seen`: the
    answers the fits were made from (`seen_votes`), read again when not given."""
    seen = _seen_or_read(seen)
    pending = waiting_for_a_model().annotate(family_id=F("instance__family_id")).order_by("pk")
    rows = list(pending.values_list("pk", "instance_id", "family_id"))
    configs = verification_configs({family_id for _, _, family_id in rows})
    units = first_units(pending.values("pk"))
    # A reference is decided only on the answers the fit saw (`_saw`), so those whose answers the
    # fit saw incomplete wait; the others are read again, locked, before anything is decided.
    waiting = [(pk, instance_id) for pk, instance_id, family_id in rows
               if votes_complete(seen.get(pk, []), configs[family_id], units.get(pk))]
    candidates = Counter(instance_id for _, instance_id in waiting)
    alone = [(pk, instance_id) for pk, instance_id in waiting if candidates[instance_id] == 1]
    decided = sum(_decide_batch(alone[start:start + BATCH], fits, known) for start in range(0, len(alone), BATCH))
    # Candidates of one instance settle it in turn, each seeing what the one before did.
    shared = [pk for pk, instance_id in waiting if candidates[instance_id] > 1]
    if shared:
        for reference in awaiting_worker_model(among=shared):
            decided += decide_one(reference, fits, known)
    return decided


def _seen_or_read(seen):
    if seen is not None:
        return seen
    from annotation import worker_models

    return seen_votes(worker_models.verification_frame())


@dataclass(slots=True)
class Waiting:
    """A waiting reference as the bulk path reads it, and the decision `mark_decided` sets on it:
    tens of thousands are decided without a model object each (`update_rows` writes them)."""

    id: int
    instance_id: int
    text: str
    verdict: str
    held_for_review: str
    decided_by: str = ""
    posterior: float | None = None
    problem_in_caption: bool = False
    problem_in_response: bool = False
    flagged_harmful: bool = False
    decided_at: datetime | None = None


@dataclass(slots=True)
class Item:
    """A waiting reference's instance, as settling it reads and writes it."""

    id: int
    family_id: int
    status: str
    reference_output: str
    caption_round: int
    # Set when it is settled, never read.
    updated_at: datetime | None = None


def _decide_batch(batch, fits, known):
    """Decide the references of `batch` ((id, instance id), each the one candidate of its instance)
    whose answers are all in, locked in one statement per table in the lock order: instances, then
    references."""
    ids = [pk for pk, _ in batch]
    with transaction.atomic():
        instances = {item.id: item for item in (
            Item(*row) for row in Instance.objects.select_for_update()
            .filter(Among(F("pk"), [instance_id for _, instance_id in batch])).order_by("pk")
            .values_list("id", "family_id", "status", "reference_output", "caption_round"))}
        references = [Waiting(*row) for row in Reference.objects.select_for_update().filter(Among(F("pk"), ids))
                      .order_by("pk").values_list("id", "instance_id", "text", "verdict", "held_for_review")]
        configs = verification_configs({item.family_id for item in instances.values()})
        votes, units = counted_votes_of(ids), first_units(ids)
        held, decided = [], []
        for reference in references:
            config = configs[instances[reference.instance_id].family_id]
            fit, seen = fits.get(config.aggregation), votes.get(reference.id, [])
            if (reference.verdict != Reference.Verdict.PENDING or reference.held_for_review
                    or not votes_complete(seen, config, units.get(reference.id)) or not _saw(fit, reference.id, seen)):
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
    WorkUnit.objects.filter(Among(F("instance_id"), [reference.instance_id for reference in references]),
                            stage=Stage.VERIFICATION, status=WorkUnit.Status.OPEN) \
        .update(status=WorkUnit.Status.CANCELLED)
    settled = []
    for reference in references:
        instance = instances[reference.instance_id]
        if reference.verdict == Reference.Verdict.CORRECT:
            if not instance.reference_output.strip():
                instance.reference_output = reference.text
            if not instance.reference_output.strip():
                raise AnnotationError(f"Instance #{instance.id} has no correct reference to be verified with.")
            instance.status, instance.updated_at = Instance.Status.VERIFIED, now
            settled.append(instance)
        elif asks_new_caption(instance=instance, reference=reference, config=configs[instance.family_id]):
            begin_new_caption_round(Instance.objects.select_related("family").get(pk=instance.id))
        else:
            instance.status, instance.updated_at = Instance.Status.DISCARDED, now
            settled.append(instance)
    # A discarded instance's reference_output is written back as it was read, under the lock.
    update_rows(Instance, settled, ["status", "reference_output", "updated_at"])
    verified = [instance for instance in settled if instance.status == Instance.Status.VERIFIED]
    discarded = [instance for instance in settled if instance.status == Instance.Status.DISCARDED]
    tournaments = set(Battle.objects.filter(Among(F("instance_id"), [instance.id for instance in verified])).order_by()
                      .values_list("tournament_id", flat=True))
    for tournament_id in sorted(tournaments):
        enqueue("tasks.refresh_leaderboard", tournament_id)
    # Their replacements are asked for at once, not when the sweep next looks.
    families = {instance.family_id for instance in discarded}
    for family in InstructionFamily.objects.filter(pk__in=families).order_by("pk"):
        create_work_units(family=family, stage=Stage.INSTRUCTION_GENERATION)


def revise_stale(fits, known, *, seen=None, decided_before=None):
    """Revise every decision a model made (before `decided_before`, when given: what this run
    decided, it decided from these fits) that the latest fit decides otherwise, on the answers it
    saw (`seen`, read again when not given); the others are read and left alone, and those it
    revises are read again, locked (`revise_decision`). Returns the DecisionChanges recorded."""
    seen = _seen_or_read(seen)
    revisable = revisable_by_worker_models()
    if decided_before is not None:
        revisable = revisable.filter(decided_at__lt=decided_before)
    decisions = list(revisable.values_list("pk", "family_id", "verdict", "decided_by", named=True))
    configs = verification_configs({reference.family_id for reference in decisions})
    stale = []
    for reference in decisions:
        config = configs[reference.family_id]
        fit, votes = fits.get(reference.decided_by), seen.get(reference.pk, [])
        if not _saw(fit, reference.pk, votes):
            continue
        decision = model_decision(fit=fit, votes=votes, config=config, known_accuracy=known)
        if verdict_after(reference, decision, votes, config) is not None:
            stale.append(reference.pk)
    changes = []
    for reference in revisable.filter(pk__in=stale):
        with transaction.atomic():
            if change := revise_decision(reference, fits, known):
                changes.append(change)
    return changes


def _saw(fit, reference_id, votes):
    return fit is not None and bool(votes) and fit.voters_of(reference_id) == frozenset(
        vote.worker_id for vote in votes)
