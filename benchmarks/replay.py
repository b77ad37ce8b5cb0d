"""`manage.py replay_answers` on a seeded simulated crowd with known truth and on a real published
annotation set (issue 41): budget against accuracy.

    .venv/bin/python benchmarks/replay.py                          # no database; a few minutes
    .venv/bin/python benchmarks/replay.py --items 3000 --spammers 0 0.2 0.4 --real path/to/answers.csv
    .venv/bin/python benchmarks/replay.py --spammers --real --truth-sets /tmp/crowd_truth_infer/datasets  # real only

For each share of spammers, `tests/crowd_simulation.py` writes a replay file: `--items` items
(half of them truly correct), `--per-item` answers each by distinct workers among `--workers`,
good workers right with an accuracy of their own drawn from U(0.6, 0.95), spammers answering
"correct" whatever they see, the rows shuffled and the asking order in the `order` column (seed
41). The command replays it under fixed overlaps of 1 to 7, ask until decided at 2 of up to 3 and
3 of up to 5, and ask until decided weighed by worker accuracy at posteriors 0.8, 0.9, 0.95 and
0.99 up to `--most`, as a researcher would run it, and prints its table, the curve of accuracy
against answers bought per kind of rule, and whether issue 41's goals are met, with the time it
took. A weighed rule takes each worker's accuracy from the truth of their other items, and again
from the truth of 5% of the items only (`--gold-share 0.05`, as a campaign mixing gold into its
work knows its workers), and from Dawid-Skene fitted on every answer, which uses no truth
(`--gold-share 0`). Then the
same for `--real` files (default: the sample of Rzhetsky et al. 2009 kept in `tests/crowd_data/`,
no truth, so weighed by Dawid-Skene and without accuracy), and, given `--truth-sets` (the
`datasets/` folder of github.com/zhydhkcws/crowd_truth_infer, which the project does not keep: its
data carry no licence), the public real crowd sets with known truth that
`benchmarks/crowd_truth_sets.py` writes as replay files (Duck, Product, Dog, Face Sentiment), each
item's answers in a random order of their own (`--order-seed`), weighed by each of the three
sources of a worker's accuracy.
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

from benchmarks.crowd_truth_sets import SETS, write_sets  # noqa: E402
from tests.crowd_simulation import simulated_crowd, write_csv  # noqa: E402

REAL = ROOT / "tests" / "crowd_data" / "rzhetsky2009_e2_sample.csv"


def run(path, model, most, *options):
    from django.core.management import call_command

    out = io.StringIO()
    started = time.perf_counter()
    call_command("replay_answers", str(path), "--model", model, "--most", str(most), *options, stdout=out)
    print(out.getvalue())
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"({time.perf_counter() - started:.1f} s; load average {load})\n", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--per-item", type=int, default=7)
    parser.add_argument("--most", type=int, default=7, help="the most answers a weighed rule asks")
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--spammers", type=float, nargs="*", default=[0.0, 0.2, 0.4],
                        help="shares of spammers in the simulated crowds (none: no simulated crowd)")
    parser.add_argument("--model", default="dawid_skene")
    parser.add_argument("--real", type=Path, nargs="*", default=[REAL])
    parser.add_argument("--truth-sets", type=Path, metavar="DATASETS",
                        help="the datasets/ folder of zhydhkcws/crowd_truth_infer: replay its real sets")
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    parser.add_argument("--order-seed", type=int, default=41, help="the seed of each real item's answer order")
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
            path = write_csv(Path(folder) / f"crowd-{share}.csv", rows)
            run_each_source(path, args.model, args.most)
        for path in args.real:
            print(f"=== {path.name} ===", flush=True)
            run(path, args.model, args.most)
        if args.truth_sets:
            written = write_sets(args.truth_sets, Path(folder), names=args.sets, seed=args.order_seed)
            for name, path in written.items():
                print(f"=== {SETS[name][1]} (Zheng et al. 2017's set), each item's answers in a random order, "
                      f"seed {args.order_seed} ===", flush=True)
                run_each_source(path, args.model, args.most)


def run_each_source(path, model, most):
    """The replay weighed by the truth of every other item, then by 5% of the items as gold and by
    Dawid-Skene (those two with fixed overlaps 3 and 5 only, to compare with)."""
    run(path, model, most)
    for share, how in (("0.05", "the truth of 5% of the items as gold"), ("0", "Dawid-Skene instead of the truth")):
        print(f"--- weighed by {how} ---", flush=True)
        run(path, model, most, "--gold-share", share, "--fixed", "3", "5", "--until-decided")


if __name__ == "__main__":
    main()
