"""Issues 26's and 41's figures in one command: what crowdbench's ways of spending crowd work buy, each beside
what it replaces, on seeded simulated workers with known accuracies.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/quality.py
    .venv/bin/python benchmarks/quality.py --only active          # one part
    .venv/bin/python benchmarks/quality.py --only curves --truth-sets /tmp/crowd_truth_infer/datasets

Each part is its own script (run alone for its options; benchmarks/README.md holds their figures):
- `models`: aggregate accuracy of crowd-kit's worker models against the majority vote at 0%, 20%
  and 40% spammers, through the real services and on frames of 100,000 answers, with each
  aggregation's wall time;
- `adaptive`: answers bought and accuracy, a fixed overlap against ask until decided, through the
  real queue on PostgreSQL;
- `curves`: budget against accuracy (issue 41): `manage.py replay_answers` on seeded simulated
  crowds, accuracy against answers bought for fixed overlaps 1 to 7, ask until agreed, and ask
  until decided weighed by worker accuracy at several posterior thresholds; with `--truth-sets`,
  also on the public real crowd sets with known truth of Zheng et al. 2017 (benchmarks/crowd_truth_sets.py);
- `active`: human judgements needed to reach Spearman >= 0.9 with the true ranking of 15 models,
  uniform against active sampling, with the rule the tournaments use.
"""

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = {
    "models": ("Worker models against the majority vote", "quality_models.py"),
    "adaptive": ("Ask until decided against a fixed overlap", "quality_adaptive.py"),
    "curves": ("Budget against accuracy, per stopping rule", "replay.py"),
    "active": ("Active against uniform battle sampling", "quality_active.py"),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(PARTS), action="append",
                        help="run this part only (may be given more than once)")
    parser.add_argument("--truth-sets", metavar="DATASETS",
                        help="curves: also replay the real sets of this datasets/ folder (zhydhkcws/crowd_truth_infer)")
    args = parser.parse_args()
    chosen = args.only or list(PARTS)
    failed = []
    for key in chosen:
        title, script = PARTS[key]
        print(f"\n=== {title} ({script}) ===", flush=True)
        extra = ["--truth-sets", args.truth_sets] if key == "curves" and args.truth_sets else []
        if subprocess.run([sys.executable, str(HERE / script), *extra], check=False).returncode:
            failed.append(script)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
