import os
from pathlib import Path

from celery import Celery
from celery.signals import task_postrun, task_prerun

from crowdbench import scoping

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")


app = Celery("crowdbench")
app.config_from_object("django.conf:settings", namespace="CELERY")

# Kombu's filesystem transport (the embedded default broker) writes into its folders without
# creating them; the web process sends jobs before any worker has started.
for _option in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
    _folder = (app.conf.broker_transport_options or {}).get(_option)
    if _folder:
        Path(_folder).mkdir(parents=True, exist_ok=True)


# A background job keeps every group's work (crowdbench/scoping.py): it says so as it starts, its
# hooks (a recorded job's status on failure) included, in a worker and when run eagerly inside a
# researcher's request alike, whatever its base class.
_scopes_left = {}


@task_prerun.connect
def _enter_every_group(task_id=None, task=None, **_):
    _scopes_left[task_id] = scoping.enter(scoping.EveryGroup(f"the job {task.name} works for every group"))


@task_postrun.connect
def _leave_every_group(task_id=None, **_):
    left = _scopes_left.pop(task_id, None)
    if left is not None:
        scoping.leave(left)
