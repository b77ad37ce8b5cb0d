"""The locked install: `make lock` writes requirements/*.txt from pyproject.toml with uv, every
package pinned with its hashes; `make lock-check` (CI) fails when pyproject.toml's dependency
lists changed since. Run with the standard library only, so CI checks before installing anything.

Each lock constrains the next to its pins (base <- run <- dev), so the image, `make run` and
`make test` share the versions of what they have in common. A lock records the sha256 of the
dependency lists it was made from in its header: comparing that is offline and instant, where
re-resolving would ask the index and fail on the day a new release appears upstream.
"""

import argparse
import hashlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
# (lock file, extras it installs beside the core): the Docker image, `make run`, `make test`.
LOCKS = [
    ("requirements/base.txt", []),
    ("requirements/run.txt", ["demo"]),
    ("requirements/dev.txt", ["dev"]),
]
FINGERPRINT_PREFIX = "# pyproject.toml dependencies sha256: "
# Required by crowd-kit for its text aggregation and learning models, which the project never
# imports (its worker models are crowdkit.aggregation's classification and pairwise ones, which
# need neither): 141 MB that every install carried for nothing. Left out of every lock, which is
# why the locks are installed with --no-deps (every dependency that is used is in them).
NOT_INSTALLED = ("transformers", "tokenizers", "safetensors")
PYTHON_VERSION = "3.11"


def fingerprint(pyproject_text: str) -> str:
    """The sha256 of what a lock is resolved from: requires-python, the dependencies and every
    extra (order and formatting aside), so that editing a comment or the version does not stale it."""
    project = tomllib.loads(pyproject_text)["project"]
    lists = {
        "requires-python": project.get("requires-python", ""),
        "dependencies": sorted(project.get("dependencies", [])),
        "optional-dependencies": {
            extra: sorted(requirements) for extra, requirements in project.get("optional-dependencies", {}).items()
        },
    }
    return hashlib.sha256(json.dumps(lists, sort_keys=True).encode()).hexdigest()


def recorded_fingerprint(lock_text: str) -> str | None:
    for line in lock_text.splitlines():
        if line.startswith(FINGERPRINT_PREFIX):
            return line[len(FINGERPRINT_PREFIX) :].strip()
    return None


def stale_locks(root: Path) -> list[str]:
    """The lock files (relative to ``root``) that are missing or were made from other dependency
    lists than ``root/pyproject.toml`` holds now."""
    expected = fingerprint((root / "pyproject.toml").read_text())
    stale = []
    for name, _ in LOCKS:
        path = root / name
        if not path.exists() or recorded_fingerprint(path.read_text()) != expected:
            stale.append(name)
    return stale


def write(uv: str, uv_args: list[str]) -> None:
    digest = fingerprint(PYPROJECT.read_text())
    previous = None
    for name, extras in LOCKS:
        path = ROOT / name
        path.parent.mkdir(exist_ok=True)
        command = [
            uv, "pip", "compile", "pyproject.toml", "--quiet", "--generate-hashes",
            "--python-version", PYTHON_VERSION, "--custom-compile-command", "make lock",
            "--output-file", name,
        ]
        command += [f"--extra={extra}" for extra in extras]
        command += [argument for package in NOT_INSTALLED for argument in ("--no-emit-package", package)]
        if previous:
            command += ["--constraint", previous]
        subprocess.run(command + uv_args, cwd=ROOT, check=True)
        lines = [line for line in path.read_text().splitlines() if not line.startswith(FINGERPRINT_PREFIX)]
        path.write_text("\n".join([FINGERPRINT_PREFIX + digest, *lines]) + "\n")
        previous = name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    write_parser = commands.add_parser("write", help="resolve pyproject.toml into requirements/*.txt")
    write_parser.add_argument("--uv", default="uv", help="the uv executable")
    commands.add_parser("check", help="fail when a lock is older than pyproject.toml's dependency lists")
    args, uv_args = parser.parse_known_args()
    if args.command == "write":
        write(args.uv, uv_args)
        return 0
    stale = stale_locks(ROOT)
    if stale:
        print(
            f"{', '.join(stale)}: not locked from pyproject.toml's dependencies as they are now; "
            "run `make lock` and commit the result.",
            file=sys.stderr,
        )
        return 1
    print(f"{len(LOCKS)} lock files match pyproject.toml.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
