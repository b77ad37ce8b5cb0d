"""The lock files (requirements/*.txt) are what pyproject.toml asks for, and go stale when it changes."""

import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.conf import settings
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(settings.BASE_DIR)
_spec = importlib.util.spec_from_file_location("lock", ROOT / "scripts/lock.py")
lock = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lock)


def pins(lock_name):
    text = (ROOT / lock_name).read_text()
    return {canonicalize_name(name): version for name, version in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", text, re.M)}


def requirements(extras):
    """pyproject.toml's requirements for the core and ``extras``, the project's own extras unfolded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pending = [Requirement(text) for text in project["dependencies"]]
    pending += [Requirement(text) for extra in extras for text in project["optional-dependencies"][extra]]
    found = []
    while pending:
        requirement = pending.pop()
        if canonicalize_name(requirement.name) == canonicalize_name(project["name"]):
            pending += [Requirement(text) for extra in requirement.extras
                        for text in project["optional-dependencies"][extra]]
        else:
            found.append(requirement)
    return found


def copy_of_the_project(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(ROOT / "requirements", tmp_path / "requirements")
    return tmp_path


def test_the_lock_files_were_made_from_pyproject_as_it_is():
    assert lock.stale_locks(ROOT) == [], "run `make lock` and commit requirements/"


@pytest.mark.parametrize(("lock_name", "extras"), lock.LOCKS)
def test_every_requirement_is_pinned_to_a_version_it_allows_with_hashes(lock_name, extras):
    pinned = pins(lock_name)
    for requirement in requirements(extras):
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{lock_name} lacks {name}"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (lock_name, requirement, pinned[name])
    text = (ROOT / lock_name).read_text()
    assert text.count("--hash=sha256:") >= len(pinned)


def test_each_lock_keeps_the_versions_of_the_one_before():
    for (smaller, _), (larger, _) in zip(lock.LOCKS, lock.LOCKS[1:], strict=False):
        smaller_pins, larger_pins = pins(smaller), pins(larger)
        assert {name: larger_pins.get(name) for name in smaller_pins} == smaller_pins, (smaller, larger)


def test_a_new_dependency_stales_every_lock_and_a_reformatted_list_none(tmp_path):
    project = copy_of_the_project(tmp_path)
    pyproject = project / "pyproject.toml"
    original = pyproject.read_text()

    # a comment, and two dependencies swapped: the same lists
    reformatted = original.replace('    "redis>=5",\n', "").replace(
        '"Django>=5.2,<6.0",', '"Django>=5.2,<6.0",  # the web framework\n    "redis>=5",')
    assert reformatted != original
    pyproject.write_text(reformatted)
    assert lock.stale_locks(project) == []

    every_lock = [name for name, _ in lock.LOCKS]
    pyproject.write_text(original.replace("dependencies = [\n", 'dependencies = [\n    "tenacity>=9",\n', 1))
    assert lock.stale_locks(project) == every_lock
    pyproject.write_text(original.replace('"hypothesis>=6",', '"hypothesis>=6.100",'))
    assert lock.stale_locks(project) == every_lock
    (project / "requirements/run.txt").unlink()
    pyproject.write_text(original)
    assert lock.stale_locks(project) == ["requirements/run.txt"]


def test_lock_check_exits_non_zero_on_a_stale_lock_and_names_the_remedy(tmp_path):
    project = copy_of_the_project(tmp_path)
    (project / "scripts").mkdir()
    shutil.copy(ROOT / "scripts/lock.py", project / "scripts")
    fresh = subprocess.run([sys.executable, "scripts/lock.py", "check"], cwd=project, capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr

    pyproject = project / "pyproject.toml"
    with_tenacity = pyproject.read_text().replace("dependencies = [\n", 'dependencies = [\n    "tenacity>=9",\n', 1)
    pyproject.write_text(with_tenacity)
    stale = subprocess.run([sys.executable, "scripts/lock.py", "check"], cwd=project, capture_output=True, text=True)
    assert stale.returncode == 1
    assert "requirements/base.txt" in stale.stderr and "make lock" in stale.stderr


def test_what_the_locks_leave_out_is_never_imported():
    """The packages crowd-kit requires but the project never imports are in no lock, and the worker
    models fit with them unimportable, as in an install from the locks (issue 42: a lean install)."""
    for lock_name, _ in lock.LOCKS:
        assert set(pins(lock_name)) & set(lock.NOT_INSTALLED) == set()
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in lock.NOT_INSTALLED)
    program = (
        f"import sys; {blocked}\n"
        "import pandas as pd\n"
        "from crowdkit.aggregation import GLAD, MACE, BradleyTerry, DawidSkene, NoisyBradleyTerry\n"
        "answers = pd.DataFrame({'task': [1, 1, 2, 2], 'worker': ['a', 'b', 'a', 'b'], 'label': [0, 0, 1, 1]})\n"
        "print(DawidSkene(n_iter=5).fit_predict(answers).tolist())\n"
    )
    found = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[0, 1]"
