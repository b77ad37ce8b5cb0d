"""The API's bad-input tests pass on the embedded SQLite default too, not only on PostgreSQL
(issue 24, finding 6: `?tournament=99999999999999999999999` was a 400-free 500 on SQLite alone,
because the hostile inputs had only ever been tried against PostgreSQL).

The database is chosen once per process: settings read DATABASE_URL when Django starts, and
pytest-django makes the test database from it. So rather than a second database alias that the
API would never use, the same test files run in a second pytest process whose DATABASE_URL is an
SQLite file of this test's own, and its result is this test's. A run that is on SQLite already
runs those files directly and skips this.
"""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

BAD_INPUT_TESTS = [
    "tests/security/test_api_bad_numbers.py",
    "tests/security/test_api_errors.py",
]


@pytest.mark.integration
def test_the_api_bad_input_tests_pass_on_sqlite(tmp_path):
    if connection.vendor == "sqlite":
        pytest.skip("this run is on SQLite: the bad-input tests ran on it directly")
    environment = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'crowdbench.sqlite3'}"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *BAD_INPUT_TESTS],
        cwd=settings.BASE_DIR, env=environment, capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
