"""/health/: database, storage (media and snapshots), the Redis broker and a live Celery worker.

Answers 200 when every check passes and 503 naming the failing ones, so a load balancer or the
compose healthcheck can tell a web process that serves pages from a deployment that does its work.
"""

from datetime import timedelta

from django.conf import settings
from health_check.views import HealthCheckView
from redis.asyncio import Redis


def checks():
    listed = [
        "health_check.checks.Database",
        ("health_check.checks.Storage", {"alias": "default"}),
        ("health_check.checks.Storage", {"alias": "snapshots"}),
    ]
    if settings.CELERY_BROKER_URL.startswith("redis"):
        listed += [
            ("health_check.contrib.redis.Redis",
             {"client_factory": lambda: Redis.from_url(settings.CELERY_BROKER_URL)}),
            # A worker must answer: without one, every queued job waits. A busy worker's main
            # process answers within a few seconds; the library's one second flaps under load.
            ("health_check.contrib.celery.Ping", {"timeout": timedelta(seconds=5)}),
        ]
    return listed


class Health(HealthCheckView):
    def get_checks(self):
        self.checks = checks()
        return super().get_checks()

    async def get(self, request, *args, **kwargs):
        response = await super().get(request, *args, **kwargs)
        # The library answers 500; a dependency being down is "unavailable", not our error.
        if response.status_code == 500:
            response.status_code = 503
        return response


health = Health.as_view()
