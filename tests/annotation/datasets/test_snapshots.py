import csv
import io
import json

import boto3
import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import transaction
from django.urls import reverse
from moto.server import ThreadedMotoServer

from annotation.datasets import manifest, snapshots
from annotation.datasets.imports import import_visit_bench
from annotation.exceptions import AnnotationError
from annotation.models import Instance, Snapshot
from tasks.exports import build_snapshot_job
from tests.export_fixtures import RAW_WORKER_IDS, judged_tournament_with_criteria_fixture  # noqa: F401
from tests.published_data import DATA, benchmark_part
from tests.scoring_factories import verified_instance

pytestmark = pytest.mark.django_db



@pytest.fixture(autouse=True)
def _snapshots_in_a_folder_of_the_test(snapshot_folder):
    return snapshot_folder


def _snapshot(**options):
    return snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False, **options))


def _read(snapshot, name):
    with snapshots.snapshot_storage().open(f"v{snapshot.version}/{name}", "rb") as handle:
        return handle.read()


def test_snapshots_are_numbered_one_two_three():
    versions = [snapshots.request_snapshot(background=False).version for _ in range(3)]
    assert versions == [1, 2, 3]


def test_a_snapshot_holds_the_published_sheets_and_its_manifest():
    import_visit_bench(path_or_file=DATA / "visit_bench_multi_images.csv")

    snapshot = _snapshot(note="first release")

    assert snapshot.status == Snapshot.Status.DONE and snapshot.progress == 100
    names = [entry["name"] for entry in snapshot.files]
    assert names == sorted(names)
    assert {"visit_bench_multi_images.csv", "visit_bench_multi_images.parquet",
            "spreadsheet/visit_bench_multi_images.csv", "human_preferences.csv",
            "human_preferences_wide.parquet", "battles.jsonl", "battles.parquet"} <= set(names)
    # As published, less the 9 rows rated incorrect without a reference: they are not in the benchmark.
    original = benchmark_part(DATA / "visit_bench_multi_images.csv").encode()
    assert _read(snapshot, "visit_bench_multi_images.csv") == original
    manifest = json.loads(_read(snapshot, "manifest.json"))
    assert manifest == json.loads(json.dumps(snapshot.manifest))
    assert manifest["version"] == 1 and manifest["content_sha256"] == snapshot.content_sha256
    assert manifest["rows"]["visit_bench_multi_images"] == 100 - 9
    assert manifest["table2"]["multi"]["references"] == 100
    assert manifest["table2"]["multi"]["correct"] == 63
    rcc = manifest["counts"]["families"]["rcc"]
    assert rcc["is_multi_image"] and sum(rcc["instances"].values()) > 0
    assert manifest["citations"][0]["source_dataset"] == "VisIT-Bench"
    card = _read(snapshot, "README.md").decode()
    assert "| `images_dense_captions` |" in card and "config_name: visit_bench_multi_images" in card
    sums = _read(snapshot, "SHA256SUMS").decode()
    assert f"{snapshot.files[0]['sha256']}  {snapshot.files[0]['name']}" in sums


def test_manifest_names_models_judges_licences_and_citations(judged_tournament_with_criteria):
    tournament, run = judged_tournament_with_criteria

    snapshot = _snapshot(tournaments=[tournament])

    manifest = snapshot.manifest
    assert {m["name"] for m in manifest["models"]} >= {"llava", "otter"}
    assert manifest["judges"][0]["engine"] == run.engine
    assert manifest["judges"][0]["evaluated_with_reference"] is False
    assert manifest["image_licences"][0]["licence"] == "CC BY 2.0"
    assert manifest["citations"] == [{"source_dataset": "WikiArt", "families": ["Art knowledge"],
                                      "citation": "@article{wikiart, title={WikiArt}}"}]
    assert manifest["tournaments"][0]["human_judgements"] > 0
    preferences = pd.read_parquet(io.BytesIO(_read(snapshot, "human_preferences.parquet")))
    assert len(preferences) == manifest["tournaments"][0]["human_judgements"]


def test_a_snapshot_carries_the_judge_report_of_its_tournaments_and_says_so_in_its_card(
        judged_tournament_with_criteria):
    tournament, run = judged_tournament_with_criteria

    snapshot = _snapshot(tournaments=[tournament])

    [report] = json.loads(_read(snapshot, manifest.JUDGE_REPORT_NAME))
    assert report["tournament_id"] == tournament.pk
    assert [row["key"] for row in report["rows"]] == ["human", f"run-{run.pk}"]
    assert report["rows"][1]["engine"] == run.engine and report["rows"][1]["position"]["flips"]["n"] > 0
    entry = next(entry for entry in snapshot.files if entry["name"] == manifest.JUDGE_REPORT_NAME)
    assert f"{entry['sha256']}  {manifest.JUDGE_REPORT_NAME}" in _read(snapshot, manifest.CONTENT_SUMS_NAME).decode()
    card = _read(snapshot, manifest.CARD_NAME).decode()
    assert "### Judge report" in card and f"`{manifest.JUDGE_REPORT_NAME}`" in card


@pytest.mark.django_db(transaction=True)
def test_a_snapshot_built_in_its_own_read_only_transaction_stores_the_leaderboard_its_judge_report_is(
        judged_tournament_with_criteria):
    """Built as the job builds it, outside any transaction, the files are read in a read-only one:
    a tournament whose leaderboard was not stored yet made the build fail ("cannot execute INSERT
    in a read-only transaction") at campaign size, where no test had built one that way."""
    from annotation.models import LeaderboardResult

    tournament, run = judged_tournament_with_criteria
    LeaderboardResult.objects.filter(tournament=tournament).delete()

    snapshot = _snapshot(tournaments=[tournament])

    assert snapshot.status == Snapshot.Status.DONE
    [report] = json.loads(_read(snapshot, manifest.JUDGE_REPORT_NAME))
    stored = LeaderboardResult.objects.get(tournament=tournament, criterion="overall")
    assert report["rows"] == stored.result["judge_report"]
    assert [row["key"] for row in report["rows"]] == ["human", f"run-{run.pk}"]


def test_no_raw_worker_id_appears_anywhere_in_a_snapshot(judged_tournament_with_criteria, snapshot_folder):
    tournament, _ = judged_tournament_with_criteria

    snapshot = _snapshot(tournaments=[tournament])

    files = [path for path in snapshot_folder.rglob("*") if path.is_file()]
    assert len(files) == len(snapshot.files) + 3
    for path in files:
        data = path.read_bytes()
        for raw in RAW_WORKER_IDS:
            assert raw.encode() not in data, path
    wide = list(csv.DictReader(io.StringIO(_read(snapshot, "human_preferences_wide.csv").decode())))
    assert wide and all(row["worker"].startswith("w_") for row in wide)
    assert RAW_WORKER_IDS[0] not in json.dumps(snapshot.manifest)


def test_the_same_data_gives_the_same_content_hash(judged_tournament_with_criteria):
    tournament, _ = judged_tournament_with_criteria

    first, second = _snapshot(tournaments=[tournament]), _snapshot(tournaments=[tournament])

    assert (first.version, second.version) == (1, 2)
    assert first.content_sha256 == second.content_sha256
    assert [f["sha256"] for f in first.files] == [f["sha256"] for f in second.files]


def test_a_change_changes_the_content_hash():
    instance = verified_instance(instruction="Before")
    instance.references.create(caption=instance.current_caption, text="r", model="gpt-4",
                               verdict="correct")
    first = _snapshot()
    Instance.objects.filter(pk=instance.pk).update(instruction="After")

    assert _snapshot().content_sha256 != first.content_sha256


def test_a_done_snapshot_is_immutable(judged_tournament_with_criteria):
    tournament, _ = judged_tournament_with_criteria
    snapshot = _snapshot()

    snapshot.note = "rewritten"
    with pytest.raises(AnnotationError, match="immutable"):
        snapshot.save()
    with pytest.raises(AnnotationError, match="immutable"), transaction.atomic():
        snapshot.tournaments.add(tournament)
    with pytest.raises(AnnotationError, match="immutable"):
        snapshot.delete()
    assert Snapshot.objects.get().note == ""


def _decided(instruction, family=None):
    instance = verified_instance(instruction=instruction, **({"family": family} if family else {}))
    instance.references.create(caption=instance.current_caption, text="r", model="gpt-4",
                               verdict="correct")
    return instance


def test_diff_against_the_previous_snapshot_lists_added_removed_changed():
    kept, changed, removed = _decided("kept"), _decided("changed"), _decided("removed")
    _snapshot()
    Instance.objects.filter(pk=changed.pk).update(instruction="changed again")
    Instance.objects.filter(pk=removed.pk).update(status=Instance.Status.DISCARDED)
    added = _decided("added")
    second = _snapshot()

    diff = manifest.diff_snapshots(new=second)

    assert diff.old.version == 1
    assert (diff.added, diff.removed, diff.changed) == ((added.pk,), (removed.pk,), (changed.pk,))
    assert kept.pk not in diff.added + diff.removed + diff.changed
    assert diff.summary() == "v2 against v1: 1 instance(s) added, 1 removed, 1 changed."


def test_snapshot_command_creates_and_diffs():
    _decided("one")
    out = io.StringIO()
    call_command("snapshot", "create", "--note", "cli", stdout=out)
    assert "Snapshot v1: Done" in out.getvalue()
    _decided("two")
    call_command("snapshot", "create", stdout=out)

    out = io.StringIO()
    call_command("snapshot", "diff", "--ids", stdout=out)

    assert "v2 against v1: 1 instance(s) added, 0 removed, 0 changed." in out.getvalue()


def test_the_background_job_builds_a_requested_snapshot_and_is_idempotent():
    _decided("one")
    snapshot = snapshots.request_snapshot(background=False)

    assert build_snapshot_job(snapshot.pk) == Snapshot.Status.DONE
    first = Snapshot.objects.get(pk=snapshot.pk)
    assert build_snapshot_job(snapshot.pk) == Snapshot.Status.DONE
    assert Snapshot.objects.get(pk=snapshot.pk).finished_at == first.finished_at


def test_admin_requests_a_snapshot_and_shows_it_read_only(client, judged_tournament_with_criteria,
                                                          django_capture_on_commit_callbacks):
    tournament, _ = judged_tournament_with_criteria
    user = get_user_model().objects.create_superuser("lead", password="pw")
    client.force_login(user)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("admin:annotation_snapshot_add"),
                               {"note": "from admin", "tournaments": [tournament.pk]})

    assert response.status_code == 302
    snapshot = Snapshot.objects.get()
    assert (snapshot.version, snapshot.created_by, snapshot.status) == (1, user, "pending")
    assert list(snapshot.tournaments.all()) == [tournament]
    assert len(callbacks) == 1
    snapshots.build_snapshot(snapshot=snapshot)
    page = client.get(reverse("admin:annotation_snapshot_change", args=[snapshot.pk]))
    assert page.status_code == 200
    assert b"human_preferences.csv" in page.content and b'value="100"' in page.content
    assert client.post(reverse("admin:annotation_snapshot_delete", args=[snapshot.pk]),
                       {"post": "yes"}).status_code == 403
    assert Snapshot.objects.filter(pk=snapshot.pk).exists()


def test_a_built_snapshots_page_offers_no_save_and_refuses_one_with_a_message(client, snapshot_folder):
    client.force_login(get_user_model().objects.create_superuser("lead", password="pw"))
    snapshot = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False))
    url = reverse("admin:annotation_snapshot_change", args=[snapshot.pk])
    assert b'name="_save"' not in client.get(url).content
    response = client.post(url, {"_save": "Save"}, follow=True)
    assert response.status_code == 200
    assert "Snapshot v1 is immutable: nothing was saved." in response.content.decode()
    assert Snapshot.objects.get(pk=snapshot.pk).content_sha256 == snapshot.content_sha256


@pytest.fixture
def s3_server():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_snapshots_are_stored_in_s3_through_django_storages(settings, s3_server):
    credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
                   "region_name": "us-east-1"}
    boto3.client("s3", endpoint_url=s3_server, **credentials).create_bucket(Bucket="crowdbench")
    settings.STORAGES = {
        **settings.STORAGES,
        "snapshots": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {"bucket_name": "crowdbench", "endpoint_url": s3_server,
                        "access_key": "testing", "secret_key": "testing",
                        "region_name": "us-east-1", "location": "snapshots"},
        },
    }
    _decided("stored in S3")

    snapshot = _snapshot()
    again = snapshots.build_snapshot(snapshot=snapshot)

    objects = boto3.client("s3", endpoint_url=s3_server, **credentials).list_objects_v2(
        Bucket="crowdbench", Prefix="snapshots/v1/")
    keys = sorted(item["Key"] for item in objects["Contents"])
    assert "snapshots/v1/visit_bench_single_image.csv" in keys
    assert "snapshots/v1/manifest.json" in keys and "snapshots/v1/SHA256SUMS" in keys
    assert len(keys) == len(snapshot.files) + 3
    body = boto3.client("s3", endpoint_url=s3_server, **credentials).get_object(
        Bucket="crowdbench", Key="snapshots/v1/visit_bench_single_image.csv")["Body"].read()
    assert b"stored in S3" in body
    assert again.content_sha256 == snapshot.content_sha256
