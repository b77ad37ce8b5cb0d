"""Fault runs of the background jobs: a real worker, real Redis, the real openai client against the
loopback server failing on command. Each ends with exact counts; the figures are printed (-s)."""

import os
import signal
import time
from collections import Counter

import pytest
from django.db import connection
from django.test import Client

from annotation.judging.prompts import request_sha256
from annotation.judging.runner import create_judge_run
from annotation.models import Caption, Instance, JudgeCall, JudgeRun, Reference
from crowdbench.celery import app
from tests.celery_support import wait_for
from tests.factories import awaiting_reference
from tests.frontend_support import caption_unit, mturk_query, published_hit
from tests.openai_fake import completion
from tests.redis_support import OwnRedis, use_broker
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


VERDICT = "Overall, Response A is better."
CONCURRENCY = 2
MODELS = ["llava", "otter", "idefics", "lynx", "blip2", "mplug"]  # 15 battles, 30 calls


def judge_environment(openai_server, **extra):
    return {"JUDGE_BASE_URL": openai_server.base_url, "JUDGE_API_KEY": "judge-key",
            "JUDGE_MODEL": "gpt-4", "JUDGE_CONCURRENCY": str(CONCURRENCY), "JUDGE_CHUNK_ROUNDS": "5",
            "MODEL_JOB_RETRY_BACKOFF_SECONDS": "1", "CELERY_VISIBILITY_TIMEOUT_SECONDS": "10",
            **extra}


def queued_run():
    instance = verified_instance()
    with_responses(instance, *MODELS)
    tournament = create_tournament(name="faults", include_reference=False)
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    app.send_task("tasks.run_judge", args=[run.pk])
    return run


def finished(run):
    run.refresh_from_db()
    return run.status in (JudgeRun.Status.DONE, JudgeRun.Status.FAILED)


def counts(run, openai_server, *, stored_before, expected=30):
    """requests sent, answered (200), stored calls, lost and duplicated judgements, completed calls
    repeated, and answers in flight at the fault (answered, then asked again: paid twice)."""
    answered = Counter(request_sha256(body) for body in openai_server.answered)
    stored = set(JudgeCall.objects.filter(run=run).values_list("request_sha256", flat=True))
    judgements = Counter(run.judgements.values_list("battle_id", "ordering", "criterion"))
    figures = {
        "requests": len(openai_server.requests),
        "answered": sum(answered.values()),
        "stored": len(stored),
        "judgements": sum(judgements.values()),
        "lost": expected - len(judgements),
        "duplicated": sum(n - 1 for n in judgements.values()),
        # A call whose answer was stored before the fault and asked again after it.
        "repeated": sum(answered[sha] - 1 for sha in stored_before),
        "in_flight": sum(answered.values()) - len(stored),
    }
    print(f"\n{figures}")
    return figures


def test_kill_9_of_the_worker_mid_run_stores_every_judgement_once(start_worker, openai_server):
    openai_server.default = completion(VERDICT)
    openai_server.latency = 0.3
    worker = start_worker(**judge_environment(openai_server))
    run = queued_run()
    wait_for(lambda: JudgeCall.objects.filter(run=run).count() >= 12, what="calls", worker=worker)

    os.killpg(worker.process.pid, signal.SIGKILL)
    worker.process.wait()
    stored_before = set(JudgeCall.objects.values_list("request_sha256", flat=True))
    restarted = start_worker(**judge_environment(openai_server))
    wait_for(lambda: finished(run), what="the run to finish", worker=restarted)

    figures = counts(run, openai_server, stored_before=stored_before)
    assert run.status == JudgeRun.Status.DONE, run.error
    assert (figures["stored"], figures["judgements"]) == (30, 30)
    assert (figures["lost"], figures["duplicated"], figures["repeated"]) == (0, 0, 0)
    # Only requests already on the wire at the kill are asked for again: at most one per judge
    # thread, and one more each that a thread sent while its finished answer waited to be stored.
    assert figures["in_flight"] <= 2 * CONCURRENCY
    assert run.progress == "30/30" and run.prompt_tokens == 100 * 30


def _cut_the_workers_database_connections(worker):
    """Terminate every other connection to the test database, once there is one: the suite runs
    with DATABASE_CONN_MAX_AGE=0, so between two tasks the worker holds none. Returns how many."""
    cut = 0

    def cut_some():
        nonlocal cut
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            cut = cursor.fetchone()[0]
        return cut >= 1

    wait_for(cut_some, what="a database connection of the worker's to cut", worker=worker)
    return cut


def test_database_connections_cut_mid_run_lose_nothing(start_worker, openai_server):
    openai_server.default = completion(VERDICT)
    openai_server.latency = 0.2
    worker = start_worker(**judge_environment(openai_server))
    run = queued_run()
    stored_before = set()
    for threshold in (6, 18):
        wait_for(lambda n=threshold: JudgeCall.objects.filter(run=run).count() >= n, what="calls",
                 worker=worker)
        stored_before = set(JudgeCall.objects.values_list("request_sha256", flat=True))
        _cut_the_workers_database_connections(worker)
    wait_for(lambda: finished(run), what="the run to finish", worker=worker)

    figures = counts(run, openai_server, stored_before=stored_before)
    assert run.status == JudgeRun.Status.DONE, run.error
    assert (figures["stored"], figures["judgements"]) == (30, 30)
    assert (figures["lost"], figures["duplicated"], figures["repeated"]) == (0, 0, 0)
    assert "OperationalError" in worker.log() or "InterfaceError" in worker.log()
    # Per cut, at most the requests on the wire (see above); nothing queued behind them is sent.
    assert figures["in_flight"] <= 2 * 2 * CONCURRENCY
    assert run.prompt_tokens == 100 * 30


def test_database_connections_cut_mid_reference_generation_lose_nothing(start_worker, openai_server):
    openai_server.default = completion("It is hot: steam rises from the cup.")
    openai_server.latency = 0.3
    instances = [awaiting_reference() for _ in range(8)]
    worker = start_worker(MODEL_JOB_RETRY_BACKOFF_SECONDS="1", MODEL_JOB_RETRY_JITTER="false")
    for instance in instances:
        app.send_task("tasks.generate_reference", args=[instance.pk])

    def made():
        return Reference.objects.filter(instance__in=instances).count()

    cuts = []
    for threshold in (2, 5):
        wait_for(lambda n=threshold: made() >= n, what="references", worker=worker)
        cuts.append(_cut_the_workers_database_connections(worker))
    wait_for(lambda: made() == len(instances), what="every reference", worker=worker)

    per_instance = Counter(Reference.objects.filter(instance__in=instances).values_list("instance", flat=True))
    figures = {"requests": len(openai_server.requests), "references": made(),
               "duplicated": sum(n - 1 for n in per_instance.values()),
               "lost": len(instances) - len(per_instance), "connections_cut": cuts}
    print(f"\n{figures}")
    assert (figures["references"], figures["lost"], figures["duplicated"]) == (8, 0, 0)
    assert set(Instance.objects.filter(pk__in=[i.pk for i in instances]).values_list("status", flat=True)) \
        == {Instance.Status.AWAITING_VERIFICATION}
    assert "OperationalError" in worker.log() or "InterfaceError" in worker.log()
    # The one solo worker has at most one answer on the wire at a cut: asked again once, no more.
    assert figures["requests"] <= len(instances) + len(cuts)


def test_a_storm_of_429_and_500_finishes_with_every_call_paid_once(start_worker, openai_server):
    openai_server.default = completion(VERDICT)
    openai_server.failure_rate = 0.5
    worker = start_worker(**judge_environment(openai_server, OPENAI_MAX_RETRIES="1",
                                              MODEL_JOB_RETRY_JITTER="false"))
    run = queued_run()
    statuses = set()

    def seen_finish():
        statuses.add(JudgeRun.objects.get(pk=run.pk).status)
        return finished(run)

    wait_for(seen_finish, what="the run to finish", worker=worker)

    figures = counts(run, openai_server, stored_before=set())
    failed = figures["requests"] - figures["answered"]
    print(f"failed requests: {failed}, statuses seen: {sorted(statuses)}")
    assert run.status == JudgeRun.Status.DONE, run.error
    assert (figures["answered"], figures["stored"], figures["judgements"]) == (30, 30, 30)
    assert (figures["lost"], figures["duplicated"], figures["in_flight"]) == (0, 0, 0)
    # Between a chunk's attempts the run showed "retrying", never "failed".
    assert failed > 0 and JudgeRun.Status.RETRYING in statuses
    assert JudgeRun.Status.FAILED not in statuses
    assert (run.progress, run.prompt_tokens, run.completion_tokens) == ("30/30", 3000, 1500)


# --- Redis down while annotators submit -------------------------------------------------------------


@pytest.fixture
def own_redis(tmp_path, settings):
    if not OwnRedis.installed():
        pytest.skip("needs redis-server")
    server = OwnRedis(tmp_path)
    server.start()
    previous = app.conf.broker_url
    settings.CELERY_BROKER_URL = server.url
    use_broker(server.url)
    yield server
    server.stop()
    use_broker(previous)


def submit_caption(client, unit, text):
    hit_id = published_hit(unit).hit_id
    query = mturk_query(assignment_id=f"ASG{unit.pk}", worker_id=f"AW{unit.pk}", hit_id=hit_id)
    page = client.get(f"/work/unit/{unit.pk}/?{query}")
    assert page.status_code == 200, page.content.decode()[-800:]
    return client.post("/work/submit/", {"token": page.context["token"], "caption-0": text},
                       headers={"Accept": "application/json"})


def test_redis_down_while_annotators_submit_gives_no_error_and_every_reference_follows(
        own_redis, start_worker, openai_server, settings):
    settings.JOB_REQUEUE_AFTER_SECONDS = 600
    units = [caption_unit() for _ in range(8)]
    openai_server.default = completion("It is hot: steam rises from the cup.")

    own_redis.stop()
    started = time.monotonic()
    responses = [submit_caption(Client(), unit, f"A white cup of coffee, latte art number {n}, "
                                "with steam rising from it on a saucer.")
                 for n, unit in enumerate(units)]
    seconds_per_submit = (time.monotonic() - started) / len(units)
    own_redis.start()
    worker = start_worker(extra_args=["--beat", "-s", str(own_redis.dir / "beat-schedule")],
                          CELERY_BROKER_URL=own_redis.url, JOB_SWEEP_SECONDS="1")
    instances = [unit.instance for unit in units]
    wait_for(lambda: Reference.objects.filter(instance__in=instances).count() == len(units),
             what="every reference", worker=worker)
    time.sleep(2)  # a second sweep, to see it queues nothing more

    statuses = Counter(response.status_code for response in responses)
    figures = {"submits": len(responses), "statuses": dict(statuses),
               "captions": Caption.objects.filter(instance__in=instances).count(),
               "references": Reference.objects.filter(instance__in=instances).count(),
               "model_requests": len(openai_server.requests),
               "seconds_per_submit": round(seconds_per_submit, 2)}
    print(f"\n{figures}")
    assert statuses == {200: 8}
    assert (figures["captions"], figures["references"], figures["model_requests"]) == (8, 8, 8)
    assert set(Instance.objects.filter(pk__in=[i.pk for i in instances])
               .values_list("status", flat=True)) == {Instance.Status.AWAITING_VERIFICATION}
    assert seconds_per_submit < 5


def test_redis_restart_without_persistence_loses_no_owed_reference(
        own_redis, start_worker, openai_server, settings):
    units = [caption_unit() for _ in range(4)]
    openai_server.default = completion("It is hot: steam rises from the cup.")
    responses = [submit_caption(Client(), unit, f"A white cup of coffee, latte art number {n}, "
                                "with steam rising from it on a saucer.")
                 for n, unit in enumerate(units)]
    queued = own_redis.client().llen("celery")

    own_redis.stop()  # no AOF, no RDB: every queued job is gone
    own_redis.start()
    lost = queued - own_redis.client().llen("celery")
    worker = start_worker(extra_args=["--beat", "-s", str(own_redis.dir / "beat-schedule")],
                          CELERY_BROKER_URL=own_redis.url, JOB_SWEEP_SECONDS="1",
                          JOB_REQUEUE_AFTER_SECONDS="2")
    instances = [unit.instance for unit in units]
    wait_for(lambda: Reference.objects.filter(instance__in=instances).count() == len(units),
             what="every reference", worker=worker)

    figures = {"submits": len(responses), "queued": queued, "lost_messages": lost,
               "references": Reference.objects.filter(instance__in=instances).count(),
               "model_requests": len(openai_server.requests)}
    print(f"\n{figures}")
    assert [response.status_code for response in responses] == [200] * 4
    assert (queued, lost) == (4, 4)
    assert (figures["references"], figures["model_requests"]) == (4, 4)
