import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")

app = Celery("crowdbench")
app.config_from_object("django.conf:settings", namespace="CELERY")

# Kombu's filesystem transport (the embedded default broker) writes into its folders without
# creating them; the web process sends jobs before any worker has started.
for _option in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
    _folder = (app.conf.broker_transport_options or {}).get(_option)
    if _folder:
        Path(_folder).mkdir(parents=True, exist_ok=True)
