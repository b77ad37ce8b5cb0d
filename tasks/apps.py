from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    # The admin's heading: the docs and the pages call Celery's work "background jobs".
    verbose_name = "Background jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Web processes queue jobs too: the Job record of each sending must be kept there as well.
        from tasks import jobs  # noqa: F401
