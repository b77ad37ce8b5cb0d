from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Web processes queue jobs too: the Job record of each sending must be kept there as well.
        from tasks import jobs  # noqa: F401
