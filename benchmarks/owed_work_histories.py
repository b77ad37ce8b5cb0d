"""Thousands of random histories through the owed-work state machine, where the suite draws 25.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/owed_work_histories.py \
        [--examples 1000] [--processes 2] [--seed 1]

It runs the suite's own property test (tests/annotation/test_owed_work_property.py: the real steps
of every crowd stage, faults at random statements, every invariant after every step) with
--examples histories of up to 50 steps in each of --processes pytest processes, each with its own
test database on the server of DATABASE_URL and its own Hypothesis seed (--seed, --seed + 1, ...),
so no two draw the same histories. It prints, per process, the histories drawn, the time taken and
pass, or the falsifying history Hypothesis printed (in full in a file it names); it exits non-zero
when any process found one.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/annotation/test_owed_work_property.py::test_every_stage_owes_each_unit_once_whatever_the_order_of_steps"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000, help="histories per process")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    server = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/"))

    runs = []
    for number in range(options.processes):
        seed = options.seed + number
        database = urlunsplit((server.scheme, server.netloc, f"/crowdbench_histories_{seed}", "", ""))
        environment = {**os.environ, "DATABASE_URL": database, "DATABASE_CONN_MAX_AGE": "0",
                       "OWED_WORK_EXAMPLES": str(options.examples)}
        command = [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider", "--create-db",
                   f"--hypothesis-seed={seed}", "--hypothesis-show-statistics"]
        runs.append((seed, time.monotonic(), subprocess.Popen(command, cwd=ROOT, env=environment, text=True,
                                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))

    failed = False
    print("| seed | histories | time | result |\n| ---: | ---: | ---: | --- |")
    for seed, started, process in runs:
        output, _ = process.communicate()
        seconds = time.monotonic() - started
        passed = process.returncode == 0
        failed |= not passed
        print(f"| {seed} | {options.examples} | {seconds:,.0f} s | {'passed' if passed else 'FAILED'} |")
        if not passed:
            # Hypothesis prints the whole falsifying history, often longer than a terminal keeps.
            log = Path(tempfile.gettempdir()) / f"owed_work_histories_{seed}.log"
            log.write_text(output)
            print(f"The falsifying history, in full: {log}\n{output[-5000:]}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
