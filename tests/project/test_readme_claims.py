"""The README's and the documentation pages' statements about behaviour hold on the site (issue 24,
finding 7): each test puts a sentence of a page beside what the site does."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from annotation.models import Stage, Worker
from tests.frontend_support import qualification_test, study, verification_unit
from tests.paths import PROJECT
from tests.redis_support import free_port


def says(page, sentence):
    """`page` (README.md, or a page of the documentation site under docs/) holds `sentence`."""
    text = re.sub(r"\s+", " ", (PROJECT / page).read_text())
    assert re.sub(r"\s+", " ", sentence) in text, (page, sentence)


@pytest.mark.django_db
def test_in_house_annotators_skip_the_qualification_test_and_the_annotator_guide_says_so():
    says("docs/annotator-guide.md", "a crowd worker (MTurk, Connect, Prolific) without the qualification "
         "is sent to `/work/qualify/<stage>/` first")
    says("docs/annotator-guide.md", "In-house annotators are trained in person (as the Prometheus-Vision "
         "authors trained theirs): they skip the test and get no gold items")
    qualification_test()
    unit = verification_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.VERIFICATION, external_id="ST1")

    participant = Client().get(f"/work/{Stage.VERIFICATION}/?" + urlencode(
        {"PROLIFIC_PID": "PP1", "STUDY_ID": "ST1", "SESSION_ID": "SE1"}), follow=True)
    assert participant.redirect_chain[-1][0].startswith(f"/work/qualify/{Stage.VERIFICATION}/")
    annotator = Client()
    user = get_user_model().objects.create_user("ann", password=None)
    annotator.force_login(user)
    task = annotator.get(f"/work/{Stage.VERIFICATION}/")
    assert task.status_code == 200 and task.context["assignment"].unit == unit
    own_page = annotator.get("/work/me/").content.decode()
    assert "As an in-house annotator you may work without these tests." in own_page

    says("docs/annotator-guide.md", "to stop one, untick *Active* on their user in the admin")
    user.is_active = False
    user.save()
    stopped = annotator.get(f"/work/{Stage.VERIFICATION}/")
    assert stopped.status_code == 302 and stopped["Location"].startswith("/work/login/")


@pytest.mark.django_db
def test_health_on_the_embedded_default_checks_what_the_operations_page_says(settings):
    says("docs/operations.md", "on the embedded default's file broker `/health/` checks the database "
         "and the storages")
    settings.CELERY_BROKER_URL = "filesystem://localhost//"
    answer = Client().get("/health/?format=json")
    assert answer.status_code == 200
    assert sorted(answer.json()) == ["Database(alias='default')", "Storage(alias='default')",
                                     "Storage(alias='snapshots')"]


def test_the_admin_section_the_operations_page_sends_failed_jobs_to_exists(admin_client):
    says("docs/operations.md", "listed on the dashboard and under *Background jobs* in the admin")
    assert "Background jobs" in admin_client.get("/admin/").content.decode()


def _as_from_a_terminal():
    # A terminal delivers Ctrl-C; a test run started in the background of a shell inherits SIGINT
    # ignored, which bash cannot trap and runserver keeps, so Ctrl-C would be tried on a process
    # that cannot hear it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.mark.integration
def test_make_run_serves_on_the_port_the_readme_names(tmp_path):
    """`make run PORT=...` hands PORT to scripts/run-local.sh (make passes a variable set on its
    command line to its recipes), which starts the worker and serves there. The script runs from a
    copy of the project's layout in tmp_path, so its var/ (worker log, beat schedule) is not the
    developer's; the broker is in memory, so no developer's queue is read."""
    says("README.md", "To serve on another port, name it: `make run PORT=8001`")
    makefile = (PROJECT / "Makefile").read_text()
    assert re.search(r"^run: .*\n(\t.*\n)*\tscripts/run-local\.sh$", makefile, re.MULTILINE)

    (tmp_path / "scripts").mkdir()
    (tmp_path / "var").mkdir()
    shutil.copy(PROJECT / "scripts" / "run-local.sh", tmp_path / "scripts")
    shutil.copy(PROJECT / "manage.py", tmp_path)
    port = free_port()
    environment = {**os.environ, "PORT": str(port), "VENV": sys.prefix, "PYTHONPATH": str(PROJECT),
                   "DATABASE_URL": f"sqlite:///{tmp_path / 'run.sqlite3'}",
                   "CELERY_BROKER_URL": "memory://"}
    server = subprocess.Popen([str(tmp_path / "scripts" / "run-local.sh")], cwd=tmp_path,
                              env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True, preexec_fn=_as_from_a_terminal)
    try:
        printed = []
        for line in server.stdout:
            printed.append(line)
            if "crowdbench is running" in line:
                break
        assert f"crowdbench is running: http://127.0.0.1:{port}/admin/" in "".join(printed), printed
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/?format=json") as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "nothing answered on the port"
                time.sleep(0.5)
    finally:
        # Ctrl-C, as the script says: it stops the server and its Celery worker.
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # What still runs, and what the worker said, so a stop that hangs says where.
            still = subprocess.run(["ps", "-o", "pid,ppid,stat,etime,args", "-g", str(server.pid)],
                                   capture_output=True, text=True).stdout
            worker_log = (tmp_path / "var" / "worker.log").read_text(errors="replace")[-3000:]
            pytest.fail(f"Ctrl-C did not stop make run within 30 s. Still running:\n{still}\n"
                        f"The end of var/worker.log:\n{worker_log}")
        finally:
            try:
                os.killpg(server.pid, signal.SIGKILL)  # whatever of the group outlived it
            except ProcessLookupError:
                pass
            server.wait()
