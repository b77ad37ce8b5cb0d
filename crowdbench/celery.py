import os
from pathlib import Path

from celery import Celery, Task

from crowdbench import scoping

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")


class EveryGroupTask(Task):
    """A background job keeps every group's work (crowdbench/scoping.py); it says so as it starts,
    in a worker and when run eagerly inside a researcher's request alike."""

    def __call__(self, *args, **kwargs):
        with scoping.every_group(f"the job {self.name} works for every group"):
            return super().__call__(*args, **kwargs)


app = Celery("crowdbench", task_cls=EveryGroupTask)
app.config_from_object("django.conf:settings", namespace="CELERY")

# Kombu's filesystem transport (the embedded default broker) writes into its folders without
# creating them; the web process sends jobs before any worker has started.
for _option in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
    _folder = (app.conf.broker_transport_options or {}).get(_option)
    if _folder:
        Path(_folder).mkdir(parents=True, exist_ok=True)
