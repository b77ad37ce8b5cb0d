"""An error the client caused is a 400 with its message at the API's edge, never a 500."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Snapshot

pytestmark = pytest.mark.django_db


def test_a_domain_error_from_a_service_is_a_400_with_its_message():
    root = get_user_model().objects.create_superuser("root", password=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=root).key}")
    Snapshot.objects.create(version=1, status=Snapshot.Status.PENDING, created_by=root)

    response = client.get("/api/snapshots/1/diff/")

    assert response.status_code == 400
    assert "is not done" in response.json()["detail"]
