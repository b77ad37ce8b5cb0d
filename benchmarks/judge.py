"""The LLM judge's wall time against the plain `openai` client making the same calls.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/judge.py \
        [--battles 200] [--latency 0.2] [--concurrency 16] [--repeat 3]

Creates (drops first) the database `crowdbench_bench_judge` on the PostgreSQL server of
DATABASE_URL, migrates it and fills it with one tournament of --battles battles between two
models. A loopback OpenAI-compatible server (tests/openai_fake.py) answers every call after
--latency seconds. Then, interleaved, --repeat times each:

- crowdbench: a reference-free judge run of the tournament (two calls per battle, both orderings),
  `run_judge` as the `judge` command and the tests run it: chunk by chunk, each answer cached
  and counted as it arrives, the judgements stored per chunk. The answer cache is emptied first,
  so every call goes to the server.
- the anchor: the same requests (the bodies the judge run sent) from the plain `openai` client on
  --concurrency threads, storing nothing.

The ideal is calls / (concurrency / latency) seconds. It prints min and median wall time of each,
calls per second, and the share of the ideal and of the plain client.
"""

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.support import fresh_database  # noqa: E402

DATABASE_NAME = "crowdbench_bench_judge"
VERDICT = "Response 1 names the saucer and the spoon; Response 2 misses both. Overall, Response 1 is better."


def set_up_django(database_url, server, concurrency):
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
    os.environ["DJANGO_DEBUG"] = "false"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["JUDGE_BASE_URL"] = server.base_url
    os.environ["JUDGE_API_KEY"] = "bench-key"
    os.environ["JUDGE_MODEL"] = "gpt-4"
    os.environ["JUDGE_CONCURRENCY"] = str(concurrency)
    import django

    django.setup()
    from crowdbench import scoping

    scoping.enter(scoping.EveryGroup("a benchmark builds and reads every group's rows"))
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def seed(battles):
    from tests.factories import FamilyFactory
    from tests.scoring_factories import create_tournament, verified_instance, with_responses

    family = FamilyFactory()
    for number in range(battles):
        instance = verified_instance(family=family, caption=[f"A cup of espresso, photo {number}."])
        with_responses(instance, "llava-1.5", "otter")
    return create_tournament(name="judge benchmark", include_reference=False)


def crowdbench_run(tournament, concurrency):
    from annotation.judging.runner import create_judge_run, run_judge
    from annotation.models import JudgeCall, JudgeJudgement, JudgeRun

    JudgeJudgement.objects.all().delete()
    JudgeRun.objects.all().delete()
    JudgeCall.objects.all().delete()
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE, concurrency=concurrency)
    started = time.perf_counter()
    run = run_judge(run=run)
    elapsed = time.perf_counter() - started
    assert run.status == JudgeRun.Status.DONE, run.error
    stored = JudgeJudgement.objects.filter(run=run).count()
    bodies = list(JudgeCall.objects.filter(run=run).values_list("request", flat=True))
    return elapsed, run.done_calls, stored, bodies


def plain_client_run(server, bodies, concurrency):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="bench-key", max_retries=0)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        answers = list(pool.map(lambda body: client.chat.completions.create(**body), bodies))
    elapsed = time.perf_counter() - started
    assert len(answers) == len(bodies)
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()

    from tests.openai_fake import FakeOpenAI, completion

    server = FakeOpenAI(default=completion(VERDICT)).start()
    server.latency = options.latency
    database_url = fresh_database(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/"),
                                  DATABASE_NAME)
    set_up_django(database_url, server, options.concurrency)
    tournament = seed(options.battles)
    calls = options.battles * 2
    ideal = calls * options.latency / options.concurrency

    ours, anchor = [], []
    for _ in range(options.repeat):
        elapsed, paid, stored, bodies = crowdbench_run(tournament, options.concurrency)
        assert paid == calls and stored == calls, (paid, stored)
        ours.append(elapsed)
        # The very requests the judge sent, prompts and all, so the server's work is the same.
        anchor.append(plain_client_run(server, bodies, options.concurrency))

    print(f"{calls} calls, {options.latency * 1000:.0f} ms each, concurrency {options.concurrency}; "
          f"ideal {ideal:.2f} s ({calls / ideal:.0f} calls/s); {options.repeat} repetitions, interleaved")
    print(f"{'':34}{'min s':>8}{'median s':>10}{'calls/s':>9}{'of ideal':>10}{'of plain':>10}")
    plain = f"plain openai client, {options.concurrency} threads"
    for label, times in (("crowdbench judge run (stored)", ours), (plain, anchor)):
        best, median = min(times), statistics.median(times)
        print(f"{label:34}{best:8.2f}{median:10.2f}{calls / median:9.1f}{ideal / median:10.0%}"
              f"{statistics.median(anchor) / median:10.0%}")
    server.stop()


if __name__ == "__main__":
    main()
