from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks and notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Every process that emits events (web, worker, commands) records their deliveries.
        from webhooks import recording  # noqa: F401
