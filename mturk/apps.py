from django.apps import AppConfig


class MturkConfig(AppConfig):
    name = "mturk"
    verbose_name = "Crowd platforms"
    default_auto_field = "django.db.models.BigAutoField"
