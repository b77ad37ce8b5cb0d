"""The API asks for the same model permissions as the admin (issue 10, finding 7)."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Snapshot
from tests.factories import FamilyFactory, InstanceFactory

pytestmark = pytest.mark.django_db


def _client_for(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def _staff(username, *codenames):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="annotation",
                                                        codename__in=codenames))
    return user


def test_a_staff_account_the_admin_refuses_gets_403_everywhere():
    InstanceFactory()
    refused = _client_for(_staff("no-perms"))

    for path in ["/api/families/", "/api/instances/", "/api/tournaments/", "/api/human-judgements/",
                 "/api/judge-judgements/", "/api/snapshots/"]:
        assert refused.get(path).status_code == 403, path
    assert refused.post("/api/snapshots/", {"note": "x"}, format="json").status_code == 403
    assert not Snapshot.objects.exists()


def test_the_view_permission_opens_that_model_only():
    instance = InstanceFactory()
    reader = _client_for(_staff("instances-only", "view_instance"))

    assert [row["id"] for row in reader.get("/api/instances/").json()["results"]] == [instance.pk]
    assert reader.get(f"/api/instances/{instance.pk}/").status_code == 200
    assert reader.get("/api/families/").status_code == 403


def test_queueing_a_snapshot_needs_the_add_permission(django_capture_on_commit_callbacks):
    FamilyFactory()
    viewer = _client_for(_staff("viewer", "view_snapshot"))
    maker = _client_for(_staff("maker", "view_snapshot", "add_snapshot"))

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        refused = viewer.post("/api/snapshots/", {"note": "x"}, format="json")
        accepted = maker.post("/api/snapshots/", {"note": "x"}, format="json")

    assert refused.status_code == 403
    assert accepted.status_code == 202
    assert Snapshot.objects.count() == 1 and len(callbacks) == 1


def test_a_method_the_api_does_not_offer_stays_405_for_a_permitted_user():
    snapshot_reader = _client_for(_staff("reader", "view_snapshot", "change_snapshot", "delete_snapshot"))
    assert snapshot_reader.delete("/api/snapshots/1/").status_code == 405


def test_a_superuser_keeps_full_access():
    InstanceFactory()
    root = get_user_model().objects.create_superuser("root", password="pw")
    assert _client_for(root).get("/api/instances/").status_code == 200
