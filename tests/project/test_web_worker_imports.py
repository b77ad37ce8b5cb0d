"""A web worker starts without the scientific stack: it loads when a request needs it (a
leaderboard, a plot, a snapshot), so the workers that serve annotators stay small."""

import os
import subprocess
import sys

import pytest

from tests.paths import PROJECT

pytestmark = pytest.mark.integration

ROOT = PROJECT
SCIENTIFIC_STACK = ("numpy", "pandas", "scipy", "sklearn", "numba", "matplotlib",
                    "pyarrow", "datasets", "crowdkit", "krippendorff")

# What gunicorn's worker does before its first request: the WSGI application, then every URL
# pattern (which imports every view) and the admin registrations.
_START_A_WEB_WORKER = """
import json, sys
from crowdbench.wsgi import application
from django.urls import get_resolver
get_resolver().url_patterns
from django.contrib import admin
admin.site.get_urls()
print(json.dumps(sorted(name for name in {stack!r} if name in sys.modules)))
"""


def _loaded_after(code):
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "crowdbench.settings",
                   "PYTHONPATH": str(ROOT)}
    finished = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment,
                              capture_output=True, text=True, timeout=120, check=True)
    return finished.stdout.strip().splitlines()[-1]


def test_a_web_worker_starts_without_the_scientific_stack():
    assert _loaded_after(_START_A_WEB_WORKER.format(stack=SCIENTIFIC_STACK)) == "[]"


def test_the_leaderboard_still_loads_it_when_asked():
    code = _START_A_WEB_WORKER.format(stack=SCIENTIFIC_STACK).replace(
        "print(", "import annotation.scoring.leaderboard, annotation.scoring.plots\nprint(")
    loaded = _loaded_after(code)
    assert '"pandas"' in loaded and '"matplotlib"' in loaded
