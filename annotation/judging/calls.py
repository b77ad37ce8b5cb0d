"""Answering a judge's requests: from the cache of every answer ever paid for, else from the model,
concurrently or through the OpenAI Batch API.

Every request is cached under the hash of its full body, so running a judge again, or resuming
one that failed half-way, pays only for what was never answered.
"""

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction

from annotation import llm
from annotation.exceptions import AnnotationError
from annotation.judging.progress import refresh_counters
from annotation.judging.prompts import request_sha256
from annotation.models import JudgeCall

logger = logging.getLogger(__name__)


def _store_call(run, sha, request, response, *, via_batch=False):
    """Cache one answer as paid for by this run; the run's counters move in the same transaction,
    so a kill between the two can neither lose the tokens nor count them twice."""
    usage = response.get("usage") or {}
    prompt_tokens = usage.get("prompt_tokens") or 0
    completion_tokens = usage.get("completion_tokens") or 0
    try:
        with transaction.atomic():
            call = JudgeCall.objects.create(
                request_sha256=sha,
                request=request,
                response=response,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=llm.cost_usd(
                    model=request["model"], prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, via_batch=via_batch,
                ) or Decimal(0),
                via_batch=via_batch,
                run=run,
            )
            refresh_counters(run)
    except IntegrityError:
        # Another run asked the same thing at the same moment; its answer is as good as ours.
        call = JudgeCall.objects.get(request_sha256=sha)
    return call


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

    Each answer is stored as it arrives, so a worker killed half-way has paid only for answers it
    kept. When storing fails (the database is gone) the requests not yet sent are cancelled
    rather than paid for and thrown away; the job's retry asks for them later.
    """
    calls, failures = {}, []
    workers = max(1, run.concurrency or settings.JUDGE_CONCURRENCY)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="judge") as pool:
        futures = {
            pool.submit(
                lambda body: client.chat.completions.create(**body).model_dump(mode="json"), request
            ): sha
            for sha, request in missing.items()
        }
        for future in as_completed(futures):
            sha = futures[future]
            try:
                response = future.result()
            except Exception as error:  # noqa: BLE001 - the others still get stored and cached
                failures.append(error)
                continue
            try:
                calls[sha] = _store_call(run, sha, missing[sha], response)
            except Exception:
                for pending in futures:
                    pending.cancel()
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
    calls = {}
    if batch.output_file_id:
        for line in client.files.content(batch.output_file_id).text.splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            response = row.get("response") or {}
            sha = row.get("custom_id")
            if sha in missing and response.get("status_code") == 200:
                calls[sha] = _store_call(run, sha, missing[sha], response["body"], via_batch=True)
    if len(calls) < len(missing):
        raise AnnotationError(
            f"Batch {batch.id} ended {batch.status} with {len(missing) - len(calls)} of "
            f"{len(missing)} requests unanswered; run the judge again to retry only those."
        )
    return calls
