from django.apps import AppConfig
from django.db.backends.signals import connection_created


class TasksConfig(AppConfig):
    name = "tasks"
    # The admin's heading: the docs and the pages call Celery's work "background jobs".
    verbose_name = "Background jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Web processes queue jobs too: the Job record of each sending must be kept there as well.
        from tasks import jobs

        # Every process's sessions, not only the workers': a web process that dies inside a
        # transaction holds its row locks the same way.
        connection_created.connect(jobs.probe_silent_peers, dispatch_uid="tasks_probe_silent_peers")
