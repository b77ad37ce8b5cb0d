"""Every path the tests use outside their own folder: the project, where tests leave screenshots,
and `../shared` (the published VisIT-Bench files and the seeds), which is never copied into the
project.

`VISIT_BENCH_DATA` names the published files' folder; by default it is `shared/data/visit-bench`
in the first folder above this checkout that has one (CI clones the repository with shared/ beside
it; a git worktree sits one level deeper).
"""

import os
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
ARTIFACTS = PROJECT / "test-artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
DOCS_SCREENSHOTS = PROJECT / "docs" / "screenshots"


def _shared():
    for parent in PROJECT.parents:
        if (parent / "shared" / "data" / "visit-bench").is_dir():
            return parent / "shared"
    return Path("shared")


SHARED = _shared()
SEEDS = SHARED / "seeds"
VISIT_BENCH = Path(os.environ.get("VISIT_BENCH_DATA") or SHARED / "data" / "visit-bench")
