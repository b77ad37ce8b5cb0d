"""A judge run from its creation to its end: started, judged chunk by chunk, finished, or run
again; the judgements it stores from the answers."""

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation import llm
from annotation.exceptions import AnnotationError
from annotation.judging.calls import answer_all
from annotation.judging.parsing import (
    answer_text,
    parse_bare_choice,
    parse_final_answer,
    parse_overall,
    parse_prometheus,
)
from annotation.judging.progress import (
    chunk_is_judged,
    chunks,
    criteria,
    refresh_counters,
    run_is_judged,
    unfinished_chunks,
)
from annotation.judging.prompts import (
    extraction_request,
    pairwise_request,
    prometheus_request,
    prompts_sha256,
    request_sha256,
)
from annotation.models import JudgeJudgement, JudgeRun
from crowdbench.events import emit
from crowdbench.jobs import enqueue

ACTIVE_STATUSES = (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING, JudgeRun.Status.RETRYING)


def base_url_label():
    """Where the judge runs, for the record: the server's origin and never a key."""
    if not settings.JUDGE_BASE_URL:
        return "api.openai.com"
    parts = urlsplit(settings.JUDGE_BASE_URL)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"


def check_judge_run(*, tournament, mode, engine=None):
    """Why a judge run of this mode and model cannot start on the tournament (AnnotationError), or
    the judge model it would use. A tournament takes any number of runs, side by side."""
    if not tournament.battles.exists():
        raise AnnotationError(f"“{tournament.name}” has no battles to judge; sample them first.")
    if mode == JudgeRun.Mode.PROMETHEUS and not (tournament.rubric or tournament.rubrics.exists()):
        raise AnnotationError(f"“{tournament.name}” has no score rubric for the Prometheus judge.")
    engine = engine or settings.JUDGE_MODEL
    if not engine:
        raise AnnotationError("No judge model is configured: set JUDGE_MODEL (e.g. gpt-4).")
    return engine


def create_judge_run(*, tournament, mode, engine=None, concurrency=0, use_batch_api=False):
    engine = check_judge_run(tournament=tournament, mode=mode, engine=engine)
    return JudgeRun.objects.create(
        tournament=tournament,
        mode=mode,
        engine=engine,
        prompts_sha256=prompts_sha256(mode),
        base_url_label=base_url_label(),
        concurrency=concurrency,
        use_batch_api=use_batch_api,
    )


@dataclass
class _Item:
    """One judgement to make: a battle, an ordering and a criterion, and the calls it needs."""

    battle: object
    ordering: str
    criterion: str
    requests: list
    answers: list = field(default_factory=list)
    fallback_request: dict | None = None


def _plan(run, battles):
    items = []
    for battle in battles:
        instance, a, b = battle.instance, battle.response_a.text, battle.response_b.text
        if run.mode == JudgeRun.Mode.PROMETHEUS:
            rubric = run.tournament.rubric_for(instance)
            if not rubric:
                raise AnnotationError(f"No score rubric for instance #{instance.pk}.")
            requests = [
                prometheus_request(
                    model=run.engine, instance=instance, response=text, rubric=rubric
                )
                for text in (a, b)
            ]
            items.append(_Item(battle, JudgeJudgement.Ordering.AB, "overall", requests))
            continue
        for criterion in criteria(run):
            for ordering, first, second in (("ab", a, b), ("ba", b, a)):
                request = pairwise_request(
                    mode=run.mode,
                    model=run.engine,
                    instance=instance,
                    first=first,
                    second=second,
                    criterion=criterion,
                )
                items.append(_Item(battle, ordering, criterion, [request]))
    return items


def start_judge_run(*, run):
    """Mark a queued run running and return the indexes of its chunks still to judge.

    A run that cannot reach its model (no key) fails here, with the reason, before any chunk.
    """
    run = JudgeRun.objects.select_related("tournament").get(pk=run.pk)
    if run.status not in ACTIVE_STATUSES:
        return []
    llm.judge_client()  # raises before any chunk when no key is set
    JudgeRun.objects.filter(pk=run.pk).update(
        status=JudgeRun.Status.RUNNING, started_at=run.started_at or timezone.now(), error=""
    )
    refresh_counters(run)
    return unfinished_chunks(run)


def judge_chunk(*, run, index):
    """Judge one chunk of the run's battles and store its judgements; idempotent.

    Returns True when no chunk of the run is left unjudged.
    """
    run = JudgeRun.objects.select_related("tournament").get(pk=run.pk)
    if run.status not in ACTIVE_STATUSES:
        return False
    run_chunks = chunks(run)
    if index < len(run_chunks) and not chunk_is_judged(run, run_chunks[index]):
        battles = list(
            run.tournament.battles.filter(pk__in=run_chunks[index]).order_by("pk")
            .select_related("instance__family", "instance__current_caption", "response_a",
                            "response_b")
            .prefetch_related("instance__instanceimage_set__image")
        )
        client = llm.judge_client()
        items = _plan(run, battles)
        primary = [request for item in items for request in item.requests]
        calls = answer_all(run, client, primary)
        for item in items:
            item.answers = [calls[request_sha256(r)] for r in item.requests]
        if run.mode == JudgeRun.Mode.PROMETHEUS:
            _store_prometheus(run, items)
        else:
            _store_pairwise(run, client, items)
    return run_is_judged(run)


def finish_judge_run(*, run):
    """Mark the run done once every chunk is judged; until then it stays running."""
    run = JudgeRun.objects.select_related("tournament").get(pk=run.pk)
    if run.status in ACTIVE_STATUSES and run_is_judged(run):
        refresh_counters(run)
        with transaction.atomic():
            JudgeRun.objects.filter(pk=run.pk).update(
                status=JudgeRun.Status.DONE, error="", finished_at=timezone.now()
            )
            _emit_run_event("judge_run.finished", run.pk)
        # Its verdicts join the leaderboard, computed in the background.
        enqueue("tasks.refresh_leaderboard", run.tournament_id)
    return JudgeRun.objects.get(pk=run.pk)


def _emit_run_event(event, run_id):
    run = JudgeRun.objects.select_related("tournament").get(pk=run_id)
    emit(event=event, scope=run.tournament, key=f"{run.pk}:{run.finished_at.isoformat()}",
         payload={"run": run.pk, "tournament": run.tournament_id, "engine": run.engine, "mode": run.mode,
                  "status": run.status, "calls": run.total_calls, "cost_usd": str(run.cost_usd),
                  "unpriced_calls": run.unpriced_calls, "error": run.error})


def record_job_status(run_id, status, error=""):
    """What a run shows while its jobs run: "retrying" with the cause between attempts, "failed"
    with the reason once the retries are spent. A run that is over is left as it ended."""
    active = JudgeRun.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES)
    if status == JudgeRun.Status.RETRYING:
        active.update(status=JudgeRun.Status.RETRYING, error=error)
    elif status == JudgeRun.Status.FAILED:
        with transaction.atomic():
            if active.update(status=JudgeRun.Status.FAILED, error=error, finished_at=timezone.now()):
                _emit_run_event("judge_run.failed", run_id)
    elif status == JudgeRun.Status.RUNNING:
        active.exclude(status=JudgeRun.Status.PENDING).update(status=JudgeRun.Status.RUNNING)


def run_again(*, run):
    """Queue a finished or failed run again (cached answers cost nothing); a run in progress is
    refused, since two copies of one run would pay for the same answers twice."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run.pk)
        if run.status in ACTIVE_STATUSES:
            raise AnnotationError(
                f"Judge run #{run.pk} is {run.get_status_display().lower()}; it can run again "
                "once it has finished or failed."
            )
        was_done = run.status == JudgeRun.Status.DONE
        run.status, run.error, run.finished_at = JudgeRun.Status.PENDING, "", None
        run.save(update_fields=["status", "error", "finished_at"])
        enqueue("tasks.run_judge", run.pk)
        if was_done:
            # Its verdicts leave the leaderboard until it has finished again.
            enqueue("tasks.refresh_leaderboard", run.tournament_id)
    return run


def run_judge(*, run):
    """Judge every battle of the run's tournament here and now, chunk by chunk (commands and tests; the
    admin queues the same steps as jobs). Errors leave the run failed with its answers cached,
    so running it again resumes."""
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.PENDING, error="")
    try:
        for index in start_judge_run(run=run):
            judge_chunk(run=run, index=index)
    except Exception as error:
        record_job_status(run.pk, JudgeRun.Status.FAILED, str(error))
        run.refresh_from_db()
        raise
    finish_judge_run(run=run)
    run.refresh_from_db()
    return run


def _store_pairwise(run, client, items):
    fallback_model = settings.JUDGE_FALLBACK_MODEL or run.engine
    decided = []
    for item in items:
        position, text, refused = _decide(run, item.answers[0])
        if position is None and text:
            item.fallback_request = extraction_request(
                mode=run.mode, model=fallback_model, answer=text
            )
        decided.append((item, position, text, refused))
    fallbacks = [item.fallback_request for item in items if item.fallback_request]
    fallback_calls = answer_all(run, client, fallbacks) if fallbacks else {}
    judgements = []
    for item, position, text, refused in decided:
        fallback_call = None
        if item.fallback_request:
            fallback_call = fallback_calls[request_sha256(item.fallback_request)]
            extracted, _ = answer_text(fallback_call.response)
            position = parse_final_answer(extracted)
            if run.mode == JudgeRun.Mode.VISION and position is None:
                position = parse_bare_choice(extracted)
        judgements.append(JudgeJudgement(
            run=run, battle=item.battle, ordering=item.ordering, criterion=item.criterion,
            cot=text,
            winner=_winner(item.ordering, position),
            used_fallback=fallback_call is not None,
            # No decision even after extraction: a refusal, recorded as a tie.
            refused=refused or position is None,
            call=item.answers[0],
            fallback_call=fallback_call,
        ))
    _store_judgements(run, judgements, ["cot", "winner", "used_fallback", "refused", "call",
                                        "fallback_call"])


def _store_prometheus(run, items):
    judgements = []
    for item in items:
        (feedback_a, score_a), (feedback_b, score_b) = (
            parse_prometheus(answer_text(call.response)[0]) for call in item.answers
        )
        if score_a is None or score_b is None or score_a == score_b:
            winner = JudgeJudgement.Winner.TIE
        else:
            winner = JudgeJudgement.Winner.A if score_a > score_b else JudgeJudgement.Winner.B
        judgements.append(JudgeJudgement(
            run=run, battle=item.battle, ordering=item.ordering, criterion=item.criterion,
            cot=f"Response A: {feedback_a}\n\nResponse B: {feedback_b}",
            winner=winner,
            score_a=score_a,
            score_b=score_b,
            refused=score_a is None or score_b is None,
            call=item.answers[0],
            call_b=item.answers[1],
        ))
    _store_judgements(run, judgements, ["cot", "winner", "score_a", "score_b", "refused", "call",
                                        "call_b"])


def _store_judgements(run, judgements, fields):
    # One statement for the chunk (a chunk judged again replaces its judgements), not a select
    # and a write per judgement: storing 400 one by one took seconds after the last answer.
    with transaction.atomic():
        JudgeJudgement.objects.bulk_create(
            judgements, update_conflicts=True,
            unique_fields=["run", "battle", "ordering", "criterion"], update_fields=fields,
        )
        refresh_counters(run)


def _decide(run, call):
    """(winner position 1/2 or None, text, refused) of a pairwise answer, before any fallback."""
    text, refused = answer_text(call.response)
    position = parse_overall(text)
    if position is None and run.mode == JudgeRun.Mode.VISION:
        position = parse_bare_choice(text)
    return position, text, refused


def _winner(ordering, position):
    if position is None:
        return JudgeJudgement.Winner.TIE
    first_is_a = ordering == JudgeJudgement.Ordering.AB
    return JudgeJudgement.Winner.A if (position == 1) == first_is_a else JudgeJudgement.Winner.B
