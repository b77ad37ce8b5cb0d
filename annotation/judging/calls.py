"""Answering a judge's requests: from the cache of every answer ever paid for, else from the model,
concurrently or through the OpenAI Batch API.

Every request is cached under the hash of its full body, so running a judge again, or resuming
one that failed half-way, pays only for what was never answered.
"""

import json
import logging
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from django.conf import settings

from annotation import llm
from annotation.exceptions import AnnotationError
from annotation.judging.progress import concurrency, refresh_counters
from annotation.judging.prompts import request_sha256
from annotation.models import JudgeCall

logger = logging.getLogger(__name__)


# How often, at most, a run's counters are recounted from its calls while its answers arrive.
COUNTERS_EVERY_SECONDS = 1.0


def _store_calls(run, answered, *, via_batch=False):
    """Cache answers [(sha, request, response)] as paid for by this run, in one INSERT statement,
    atomic on its own: one round trip for all that has arrived, where a transaction per answer
    (and a recount of the run in each) fell behind the answers.

    The run's tokens and cost are not moved here: `refresh_counters` derives them from the stored
    calls, so a kill at any moment can neither lose them nor count them twice."""
    fresh = []
    for sha, request, response in answered:
        usage = response.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens") or 0
        completion_tokens = usage.get("completion_tokens") or 0
        fresh.append(JudgeCall(
            request_sha256=sha, request=request, response=response,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            cost_usd=llm.cost_usd(model=request["model"], prompt_tokens=prompt_tokens,
                                  completion_tokens=completion_tokens, via_batch=via_batch),
            via_batch=via_batch, run=run,
        ))
    # A request another run asked at the same moment keeps that run's answer, as good as ours.
    JudgeCall.objects.bulk_create(fresh, ignore_conflicts=True)


def answer_all(run, client, requests):
    """Every request answered, from the cache or the model: {sha: JudgeCall}."""
    by_sha = {}
    for request in requests:
        by_sha.setdefault(request_sha256(request), request)
    # The requests themselves (the prompts) are not read back: the caller has them.
    cached = JudgeCall.objects.defer("request")
    calls = {call.request_sha256: call for call in cached.filter(request_sha256__in=by_sha)}
    missing = {sha: request for sha, request in by_sha.items() if sha not in calls}
    if missing:
        if run.use_batch_api:
            _answer_by_batch(run, client, missing)
        else:
            _answer_concurrently(run, client, missing)
        calls.update({call.request_sha256: call for call in cached.filter(request_sha256__in=missing)})
    return calls


def _answer_concurrently(run, client, missing):
    """Threads only wait on the network; the database is written from this thread alone.

    Each answer is stored as it arrives, together with any that arrived while the last were being
    stored, so a worker killed half-way has paid only for answers it kept; the run's counters are
    recounted at most every COUNTERS_EVERY_SECONDS meanwhile. When storing fails (the database is
    gone) the requests not yet sent are cancelled rather than paid for and thrown away; the job's
    retry asks for them later.
    """
    failures = []
    counted_at = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency(run), thread_name_prefix="judge") as pool:
        futures = {
            pool.submit(
                lambda body: client.chat.completions.create(**body).model_dump(mode="json"), request
            ): sha
            for sha, request in missing.items()
        }
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            answered = []
            for future in done:
                sha = futures[future]
                try:
                    answered.append((sha, missing[sha], future.result()))
                except Exception as error:  # noqa: BLE001 - the others still get stored and cached
                    failures.append(error)
            try:
                _store_calls(run, answered)
                if time.monotonic() - counted_at >= COUNTERS_EVERY_SECONDS:
                    refresh_counters(run)
                    counted_at = time.monotonic()
            except Exception:
                for waiting in pending:
                    waiting.cancel()
                raise
    if failures:
        logger.warning("Judge run %s: %s of %s calls failed.", run.pk, len(failures), len(missing))
        raise failures[0]


def _answer_by_batch(run, client, missing):
    """The OpenAI Batch API: upload the requests, wait for the batch, read its answers."""
    lines = "".join(
        json.dumps(
            {"custom_id": sha, "method": "POST", "url": "/v1/chat/completions", "body": request}
        )
        + "\n"
        for sha, request in missing.items()
    )
    upload = client.files.create(
        file=(f"judge-run-{run.pk}.jsonl", lines.encode("utf-8")), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"judge_run": str(run.pk)},
    )
    run.batch_ids = [*run.batch_ids, batch.id]
    run.save(update_fields=["batch_ids"])
    while batch.status not in ("completed", "failed", "expired", "cancelled"):
        time.sleep(settings.JUDGE_BATCH_POLL_SECONDS)
        batch = client.batches.retrieve(batch.id)
    answered = []
    if batch.output_file_id:
        for line in client.files.content(batch.output_file_id).text.splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            response = row.get("response") or {}
            sha = row.get("custom_id")
            if sha in missing and response.get("status_code") == 200:
                answered.append((sha, missing[sha], response["body"]))
    _store_calls(run, answered, via_batch=True)
    if len(answered) < len(missing):
        raise AnnotationError(
            f"Batch {batch.id} ended {batch.status} with {len(missing) - len(answered)} of "
            f"{len(missing)} requests unanswered; run the judge again to retry only those."
        )
