from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks and notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Every process that emits events (web, worker, commands) records their deliveries.
        from annotation.audit import register
        from webhooks import recording  # noqa: F401
        from webhooks.models import Endpoint

        # Who registered, changed or removed a URL that events are sent to; never the signing secret,
        # which anyone who reads the trail could sign deliveries with (webhooks/services.py logs its rotation).
        register(Endpoint, exclude=["secret"])
