"""/health/ reports the database, both storages, the Redis broker and whether a worker answers."""

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.integration
def test_health_names_each_service_and_is_unavailable_without_a_worker(client):
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs CELERY_BROKER_URL for Redis (make test)")

    response = client.get("/health/?format=json")

    report = response.json()
    assert response.status_code == 503
    assert {name.split("(")[0]: status for name, status in report.items()} == {
        "Database": "OK", "Storage": "OK", "Redis": "OK",
        "Ping": "Unavailable: Celery workers unavailable"}
    assert sum(name.startswith("Storage") for name in report) == 2


def test_health_with_the_embedded_broker_checks_database_and_storage(client, settings):
    settings.CELERY_BROKER_URL = "filesystem://localhost//"

    response = client.get("/health/?format=json")

    assert response.status_code == 200
    assert all(status == "OK" for status in response.json().values())
    assert len(response.json()) == 3
