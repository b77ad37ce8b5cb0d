"""Answering a judge's requests: from the cache of every answer ever paid for, else from the model,
concurrently or through the OpenAI Batch API.

Every request is cached under the hash of its full body, so running a judge again, or resuming
one that failed half-way, pays only for what was never answered.
"""

import json
import logging
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import F

from annotation import llm
from annotation.exceptions import AnnotationError
from annotation.judging.progress import concurrency
from annotation.judging.prompts import request_sha256
from annotation.models import JudgeCall, JudgeRun

logger = logging.getLogger(__name__)


def _store_calls(run, answered, *, via_batch=False):
    """Cache answers as paid for by this run: {sha: JudgeCall} for [(sha, request, response)].

    The run's counters move in the same transaction, so a kill between the two can neither lose
    the tokens nor count them twice. Storing every answer that has arrived in one transaction
    (three statements) keeps storing ahead of the answers; one transaction each fell behind."""
    fresh = []
    for sha, request, response in answered:
        usage = response.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens") or 0
        completion_tokens = usage.get("completion_tokens") or 0
        fresh.append(JudgeCall(
            request_sha256=sha, request=request, response=response,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            cost_usd=llm.cost_usd(model=request["model"], prompt_tokens=prompt_tokens,
                                  completion_tokens=completion_tokens, via_batch=via_batch)
            or Decimal(0),
            via_batch=via_batch, run=run,
        ))
    if not fresh:
        return {}
    with transaction.atomic():
        # A request another run asked at the same moment keeps that run's answer, as good as ours.
        JudgeCall.objects.bulk_create(fresh, ignore_conflicts=True)
        stored = {call.request_sha256: call for call in
                  JudgeCall.objects.filter(request_sha256__in=[call.request_sha256 for call in fresh])}
        # Only this run's rows are its to pay for; the chunk's end recounts from the calls
        # (refresh_counters), so the figures stay derived from what was paid for.
        paid = [call for call in stored.values() if call.run_id == run.pk]
        JudgeRun.objects.filter(pk=run.pk).update(
            done_calls=F("done_calls") + len(paid),
            prompt_tokens=F("prompt_tokens") + sum(call.prompt_tokens for call in paid),
            completion_tokens=F("completion_tokens") + sum(call.completion_tokens for call in paid),
            cost_usd=F("cost_usd") + sum((call.cost_usd for call in paid), Decimal(0)),
        )
    return stored


def answer_all(run, client, requests):
    """Every request answered, from the cache or the model: {sha: JudgeCall}."""
    by_sha = {}
    for request in requests:
        by_sha.setdefault(request_sha256(request), request)
    calls = {
        call.request_sha256: call for call in JudgeCall.objects.filter(request_sha256__in=by_sha)
    }
    missing = {sha: request for sha, request in by_sha.items() if sha not in calls}
    if missing and run.use_batch_api:
        calls.update(_answer_by_batch(run, client, missing))
    elif missing:
        calls.update(_answer_concurrently(run, client, missing))
    return calls


def _answer_concurrently(run, client, missing):
    """Threads only wait on the network; the database is written from this thread alone.

    Each answer is stored as it arrives, together with any that arrived while the last were being
    stored, so a worker killed half-way has paid only for answers it kept. When storing fails (the
    database is gone) the requests not yet sent are cancelled rather than paid for and thrown
    away; the job's retry asks for them later.
    """
    calls, failures = {}, []
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
                calls.update(_store_calls(run, answered))
            except Exception:
                for waiting in pending:
                    waiting.cancel()
                raise
    if failures:
        logger.warning("Judge run %s: %s of %s calls failed.", run.pk, len(failures), len(missing))
        raise failures[0]
    return calls


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
    calls = _store_calls(run, answered, via_batch=True)
    if len(calls) < len(missing):
        raise AnnotationError(
            f"Batch {batch.id} ended {batch.status} with {len(missing) - len(calls)} of "
            f"{len(missing)} requests unanswered; run the judge again to retry only those."
        )
    return calls
