"""`manage.py replay_answers` on a seeded simulated crowd with known truth and on a real published
annotation set (issue 41).

    .venv/bin/python benchmarks/replay.py                          # no database; a few minutes
    .venv/bin/python benchmarks/replay.py --items 3000 --spammers 0 0.2 0.4 --real path/to/answers.csv

For each share of spammers, `tests/crowd_simulation.py` writes a replay file: `--items` items
(half of them truly correct), `--per-item` answers each by distinct workers among `--workers`,
good workers right with an accuracy of their own drawn from U(0.6, 0.95), spammers answering
"correct" whatever they see, the rows shuffled and the asking order in the `order` column (seed
41). The command replays it under fixed overlaps of 1, 3 and 5 and ask until decided at 2 of up
to 3 and 3 of up to 5, as a researcher would run it, and its table is printed with the time it
took. Then the same for `--real` files (default: the sample of Rzhetsky et al. 2009 kept in
`tests/crowd_data/`, no truth).
"""

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.crowd_simulation import simulated_crowd, write_csv  # noqa: E402

REAL = ROOT / "tests" / "crowd_data" / "rzhetsky2009_e2_sample.csv"


def run(path, model):
    from django.core.management import call_command

    out = io.StringIO()
    started = time.perf_counter()
    call_command("replay_answers", str(path), "--model", model, stdout=out)
    print(out.getvalue())
    print(f"({time.perf_counter() - started:.1f} s)\n", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--per-item", type=int, default=5)
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--spammers", type=float, nargs="+", default=[0.0, 0.2, 0.4])
    parser.add_argument("--model", default="dawid_skene")
    parser.add_argument("--real", type=Path, nargs="*", default=[REAL])
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
    import django

    django.setup()
    with tempfile.TemporaryDirectory() as folder:
        for share in args.spammers:
            rows = simulated_crowd(items=args.items, workers=args.workers, per_item=args.per_item,
                                   spammer_share=share)
            print(f"=== simulated crowd, {share:.0%} spammers, {args.items:,} items x {args.per_item} answers, "
                  f"{args.workers} workers, seed 41 ===", flush=True)
            run(write_csv(Path(folder) / f"crowd-{share}.csv", rows), args.model)
    for path in args.real:
        print(f"=== {path.name} ===", flush=True)
        run(path, args.model)


if __name__ == "__main__":
    main()
