"""A snapshot's files download for a researcher allowed to view snapshots, from the admin and from
the API, on local disk and on S3 (a moto server through django-storages); nobody else gets them
(issue 9.2)."""

import hashlib
import io
import json
import re

import boto3
import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse
from moto.server import ThreadedMotoServer
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.datasets import manifest, snapshots
from tests.scoring_factories import verified_instance

pytestmark = pytest.mark.django_db

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


@pytest.fixture
def local_storage(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "snapshots": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                      "OPTIONS": {"location": str(tmp_path / "snapshots")}},
    }


@pytest.fixture
def s3_storage(settings):
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, **CREDENTIALS).create_bucket(Bucket="crowdbench")
    settings.STORAGES = {
        **settings.STORAGES,
        "snapshots": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {"bucket_name": "crowdbench", "endpoint_url": endpoint, "access_key": "testing",
                        "secret_key": "testing", "region_name": "us-east-1", "location": "snapshots"},
        },
    }
    yield endpoint
    server.stop()


def built_snapshot():
    instance = verified_instance(instruction="What colour is the bicycle?")
    instance.references.create(caption=instance.current_caption, text="Red.", model="gpt-4", verdict="correct")
    return snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False))


def user(name, *, staff=False, superuser=False, permissions=()):
    account = get_user_model().objects.create_user(name, password="pw", is_staff=staff, is_superuser=superuser)
    for codename in permissions:
        account.user_permissions.add(Permission.objects.get(codename=codename))
    return account


def api_for(account):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=account).key}")
    return client


def body(response):
    return b"".join(response.streaming_content) if response.streaming else response.content


def read_back(name, data):
    """What a dataset user does with each file."""
    if name.endswith(".csv"):
        return pd.read_csv(io.BytesIO(data))
    if name.endswith(".jsonl"):
        return pd.read_json(io.BytesIO(data), lines=True)
    if name.endswith(".parquet"):
        return pd.read_parquet(io.BytesIO(data))
    if name.endswith(".json"):
        return json.loads(data)
    return data.decode("utf-8")


def check_every_file_downloads(snapshot, fetch):
    sums = {}
    for name in snapshots.downloadable_names(snapshot):
        response = fetch(name)
        assert response.status_code == 200, (name, response.status_code)
        assert response["Content-Disposition"].startswith("attachment")
        data = body(response)
        sums[name] = hashlib.sha256(data).hexdigest()
        read_back(name, data)
    for entry in snapshot.files:
        assert sums[entry["name"]] == entry["sha256"], entry["name"]
    listed = dict(line.split("  ")[::-1] for line in body(fetch(manifest.CONTENT_SUMS_NAME)).decode().splitlines())
    assert all(sums[name] == digest for name, digest in listed.items())
    return sums


@pytest.mark.parametrize("storage", ["local_storage", "s3_storage"])
def test_a_researcher_downloads_every_file_from_the_admin_page(client, request, storage):
    request.getfixturevalue(storage)
    snapshot = built_snapshot()
    client.force_login(user("lead", staff=True, superuser=True))

    page = client.get(reverse("admin:annotation_snapshot_change", args=[snapshot.pk])).content.decode()
    links = dict((name, href) for href, name in re.findall(r'<a href="([^"]+/files/[^"]+)" download>([^<]+)</a>', page))

    assert sorted(links) == sorted(snapshots.downloadable_names(snapshot))
    assert all(href.startswith("/admin/") for href in links.values())
    assert len(check_every_file_downloads(snapshot, lambda name: client.get(links[name]))) == len(links)


@pytest.mark.parametrize("storage", ["local_storage", "s3_storage"])
def test_the_api_gives_a_download_url_per_file_and_it_downloads(request, settings, storage):
    request.getfixturevalue(storage)
    settings.PUBLIC_BASE_URL = ""  # so the address is the one the client used
    snapshot = built_snapshot()
    api = api_for(user("analyst", staff=True, permissions=["view_snapshot"]))

    listed = api.get(f"/api/snapshots/{snapshot.version}/").json()

    prefix = "http://testserver/api/snapshots/1/files/"
    assert all(entry["download_url"].startswith(prefix) for entry in listed["files"])
    urls = {entry["name"]: entry["download_url"] for entry in listed["downloads"]}
    assert set(urls) == set(snapshots.downloadable_names(snapshot))
    check_every_file_downloads(snapshot, lambda name: api.get(urls[name]))


def test_nobody_else_gets_a_snapshot_file(client, local_storage):
    snapshot = built_snapshot()
    name = snapshot.files[0]["name"]
    admin_url = reverse("admin:annotation_snapshot_file", args=[snapshot.pk, name])
    api_url = f"/api/snapshots/{snapshot.version}/files/{name}/"

    anonymous = client.get(admin_url)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    assert APIClient().get(api_url).status_code == 401

    worker = user("worker")
    client.force_login(worker)
    assert client.get(admin_url).status_code == 302
    assert api_for(worker).get(api_url).status_code == 403

    staff_without_permission = user("intern", staff=True, permissions=["view_instance"])
    client.force_login(staff_without_permission)
    assert client.get(admin_url).status_code == 403
    assert api_for(staff_without_permission).get(api_url).status_code == 403

    allowed = user("analyst", staff=True, permissions=["view_snapshot"])
    client.force_login(allowed)
    assert client.get(admin_url).status_code == 200
    assert api_for(allowed).get(api_url).status_code == 200


@pytest.mark.parametrize("name", ["../../../etc/passwd", "v1/manifest.json", "nope.csv", "manifest.json/..",
                                  "%2e%2e/x"])
def test_only_the_files_a_snapshot_lists_are_served(client, local_storage, name):
    snapshot = built_snapshot()
    client.force_login(user("lead", staff=True, superuser=True))
    assert client.get(f"/admin/annotation/snapshot/{snapshot.pk}/files/{name}").status_code == 404
    assert api_for(get_user_model().objects.get(username="lead")).get(
        f"/api/snapshots/{snapshot.version}/files/{name}/").status_code == 404


def test_a_snapshot_still_building_offers_no_download(client, local_storage):
    pending = snapshots.request_snapshot(background=False)
    client.force_login(user("lead", staff=True, superuser=True))
    assert client.get(reverse("admin:annotation_snapshot_file", args=[pending.pk, "manifest.json"])).status_code == 404
    listed = api_for(get_user_model().objects.get(username="lead")).get(f"/api/snapshots/{pending.version}/").json()
    assert listed["downloads"] == []
