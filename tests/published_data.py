"""Where the tests find the files the VisIT-Bench authors published (never copied into the project).

`VISIT_BENCH_DATA` names the folder; by default it is `shared/data/visit-bench` in the first
folder above this checkout that has one (CI clones the repository with shared/ beside it; a git
worktree sits one level deeper).
"""

import os
from pathlib import Path


def _default():
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared/data/visit-bench"
        if candidate.is_dir():
            return candidate
    return Path("shared/data/visit-bench")


DATA = Path(os.environ.get("VISIT_BENCH_DATA") or _default())
MULTI = DATA / "visit_bench_multi_images.csv"
SINGLE = DATA / "visit_bench_single_image.csv"
ANNOTATED = DATA / "visit_fully_annotated_example.csv"
PREDICTIONS = DATA / "predictions_llamaadapter-v2.csv"
SHEETS = (MULTI, SINGLE, ANNOTATED)
