"""What a judge run owes and what it has done, read back from the stored judgements and calls.

A background run is a start job, one job per chunk of battles and a finish job
(tasks/judging.py), each under its own lease, so no job runs longer than a chunk and a second
delivery of any of them exits at once.
"""

from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Q, Sum

from annotation.models import CHIRP_CRITERIA, JudgeCall, JudgeJudgement, JudgeRun


def criteria(run):
    """CHIRP's criteria a run asks about: all of them for a vision judge of a tournament that wants
    them, else overall alone."""
    if run.mode == JudgeRun.Mode.VISION and run.tournament.with_criteria:
        return CHIRP_CRITERIA
    return CHIRP_CRITERIA[:1]


def _judgements_per_battle(run):
    return 1 if run.mode == JudgeRun.Mode.PROMETHEUS else 2 * len(criteria(run))


def _calls_per_battle(run):
    # Prometheus asks twice for its one judgement: once per response.
    return 2 if run.mode == JudgeRun.Mode.PROMETHEUS else _judgements_per_battle(run)


def concurrency(run):
    """How many of the run's calls are in flight at once."""
    return max(1, run.concurrency or settings.JUDGE_CONCURRENCY)


def battles_per_chunk(run):
    # A chunk is a whole number of rounds of the run's concurrent calls: its length in time is then
    # the same at any concurrency (what the broker's visibility timeout is set against), and no
    # thread idles while the chunk's last calls finish, as it did when 40 calls met 16 threads.
    calls = settings.JUDGE_CHUNK_ROUNDS * concurrency(run)
    return max(1, calls // _calls_per_battle(run))


def _battle_ids(run):
    return list(run.tournament.battles.order_by("pk").values_list("pk", flat=True))


def chunks(run):
    ids, size = _battle_ids(run), battles_per_chunk(run)
    return [ids[start:start + size] for start in range(0, len(ids), size)]


def unfinished_chunks(run):
    """Indexes of the chunks with a judgement still missing."""
    judged = set(_judged_battles(run).values_list("battle_id", flat=True))
    return [index for index, ids in enumerate(chunks(run)) if not judged.issuperset(ids)]


def chunk_is_judged(run, battle_ids):
    return _judged_battles(run).filter(battle_id__in=battle_ids).count() == len(set(battle_ids))


def run_is_judged(run):
    """Every battle of the run's tournament judged: asked of the database, where reading the whole
    run's judgements after every chunk grew with the run. Asked battle by battle, not as a count
    of judged battles: a battle moved to another tournament keeps its judgements."""
    judged = _judged_battles(run).values("battle_id")
    return not run.tournament.battles.exclude(pk__in=judged).exists()


def _judged_battles(run):
    """The battles with all the run's judgements stored, as rows of battle_id."""
    return (
        JudgeJudgement.objects.filter(run=run).values("battle_id").annotate(stored=Count("pk"))
        .filter(stored__gte=_judgements_per_battle(run))
    )


def refresh_counters(run):
    """A run's progress, tokens and cost, derived from the calls it paid for and the judgements it
    stored: recounting after a restart gives the same figures, never a double count.

    Progress is counted against the run's own battles: what its stored judgements used, and the
    answers already back for judgements not stored yet (a chunk in progress), counted only as far
    as those judgements still owe calls. Paid answers that no stored judgement uses yet include
    fallback prompts (asked once a first answer said nothing), so counted alone they ran past the
    total (597 of 590 was seen mid-run).
    """
    paid = JudgeCall.objects.filter(run=run).aggregate(
        prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"),
        cost=Sum("cost_usd"), unpriced=Count("pk", filter=Q(cost_usd__isnull=True)),
    )
    judgements = JudgeJudgement.objects.filter(run=run, battle__tournament_id=run.tournament_id)
    counts = judgements.aggregate(
        stored=Count("pk"), fallback=Count("fallback_call", distinct=True),
        second=Count("call_b"),
    )
    used = (Q(pk__in=judgements.values("call")) | Q(pk__in=judgements.values("fallback_call"))
            | Q(pk__in=judgements.values("call_b")))
    # Calls the run's judgements use but another run paid for, found by the database: loading
    # their ids into Python on every recount grew with the run.
    cached = JudgeCall.objects.filter(used).exclude(run=run).count()
    in_flight = JudgeCall.objects.filter(run=run).exclude(used).count()
    owed_primary = run.tournament.battles.count() * _calls_per_battle(run)
    primary_done = counts["stored"] + counts["second"]
    JudgeRun.objects.filter(pk=run.pk).update(
        total_calls=owed_primary + counts["fallback"],
        done_calls=primary_done + counts["fallback"] + max(0, min(in_flight, owed_primary - primary_done)),
        cached_calls=cached,
        fallback_calls=counts["fallback"],
        prompt_tokens=paid["prompt"] or 0,
        completion_tokens=paid["completion"] or 0,
        cost_usd=paid["cost"] or Decimal(0),
        unpriced_calls=paid["unpriced"],
    )
