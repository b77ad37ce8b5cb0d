import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")

app = Celery("crowdbench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["tasks"], related_name=None)
