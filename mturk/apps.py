from django.apps import AppConfig


class MturkConfig(AppConfig):
    name = "mturk"
    verbose_name = "Crowd platforms"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from annotation.audit import register
        from mturk import listeners  # noqa: F401 (connects the platforms to the domain's signals)
        from mturk.models import CrowdStudy

        # Launching, publishing and closing a study; its platform calls are in mturk's own audit log.
        register(CrowdStudy)
