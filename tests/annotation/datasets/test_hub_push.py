"""Pushing a snapshot to the Hugging Face Hub with the real `huggingface_hub` client, against a
loopback server speaking the Hub's API (tests/hub_fake.py)."""

import datasets
import huggingface_hub.constants
import pytest
from django.core.management import CommandError, call_command

from annotation.datasets import manifest, snapshots
from annotation.datasets.hub import push_snapshot
from annotation.exceptions import AnnotationError
from tests.export_fixtures import judged_tournament_with_criteria_fixture  # noqa: F401
from tests.hub_fake import FakeHub

pytestmark = pytest.mark.django_db

TOKEN = "hf_a_write_token"
REPO = "crowdbench-lab/visit-bench"


@pytest.fixture(autouse=True)
def _snapshots_in_a_folder_of_the_test(snapshot_folder):
    return snapshot_folder


@pytest.fixture
def hub(settings, monkeypatch):
    server = FakeHub(token=TOKEN).start()
    settings.HUGGINGFACE_ENDPOINT = server.url
    settings.HUGGINGFACE_TOKEN = TOKEN
    settings.HUGGINGFACE_DATASET_REPO = REPO
    # The loopback Hub speaks LFS, not Xet's storage protocol (tests/hub_fake.py).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    yield server
    server.stop()


@pytest.fixture
def built(judged_tournament_with_criteria):
    tournament, _ = judged_tournament_with_criteria
    return snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False, tournaments=[tournament]))


def test_the_command_pushes_every_file_of_the_latest_snapshot_as_built(hub, built, snapshot_folder, capsys):
    call_command("push_snapshot")

    repo = hub.dataset(REPO)
    folder = snapshot_folder / f"v{built.version}"
    built_files = {path.relative_to(folder).as_posix(): path.read_bytes()
                   for path in folder.rglob("*") if path.is_file()}
    assert repo.files == built_files
    assert {"README.md", "manifest.json", "SHA256SUMS", "battles.parquet",
            "spreadsheet/human_preferences.csv"} <= set(repo.files)
    assert repo.private and repo.repo_type == "dataset"
    assert repo.commits == [{"summary": f"crowdbench snapshot v{built.version}",
                             "description": f"Content hash (sha256 of SHA256SUMS): {built.content_sha256}",
                             "paths": sorted(built_files)}]
    # The Parquet files went through LFS, to presigned URLs that carry no token; the rest went inline.
    uploads = [request for request in hub.requests if request.method == "PUT"]
    assert len(uploads) == sum(name.endswith(".parquet") for name in repo.files)
    assert all(request.authorization == "" for request in uploads)
    assert all(request.authorization == f"Bearer {TOKEN}" for request in hub.requests if request.method == "POST")
    assert f"{len(built_files)} files pushed to {hub.url}/datasets/{REPO}" in capsys.readouterr().out


def test_what_arrives_on_the_hub_loads_with_datasets(hub, built, tmp_path):
    push_snapshot(snapshot=built, repo_id=REPO, token=TOKEN)

    arrived = tmp_path / "arrived"
    for name, data in hub.dataset(REPO).files.items():
        (arrived / name).parent.mkdir(parents=True, exist_ok=True)
        (arrived / name).write_bytes(data)
    battles = datasets.load_dataset(str(arrived), "battles", split=manifest.SPLIT, cache_dir=str(tmp_path / "cache"))
    assert battles.num_rows == built.manifest["rows"]["battles"] > 0


def test_pushing_again_changes_nothing_and_a_later_snapshot_sends_only_what_changed(hub, built):
    first = push_snapshot(snapshot=built, repo_id=REPO, token=TOKEN, private=False)
    again = push_snapshot(snapshot=built, repo_id=REPO, token=TOKEN)

    repo = hub.dataset(REPO)
    assert len(repo.commits) == 1 and not repo.private
    assert again.commit_url == first.commit_url

    later = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(
        background=False, tournaments=built.tournaments.all()))
    pushed = push_snapshot(snapshot=later, repo_id=REPO, token=TOKEN)

    # The same data: only the manifest and the card (which name the version) differ.
    assert repo.commits[1]["paths"] == [manifest.CARD_NAME, manifest.MANIFEST_NAME]
    assert pushed.commit_url != first.commit_url
    with snapshots.open_snapshot_file(snapshot=later, name=manifest.MANIFEST_NAME) as stored:
        assert repo.files[manifest.MANIFEST_NAME] == stored.read()


def test_a_token_the_hub_refuses_is_a_clear_error(hub, built):
    with pytest.raises(AnnotationError, match=r"The Hub refused the push of .* \(401\)"):
        push_snapshot(snapshot=built, repo_id=REPO, token="hf_not_this_one")
    assert hub.repos == {}


def test_no_token_or_no_repository_stops_before_anything_is_sent(hub, built, settings):
    settings.HUGGINGFACE_TOKEN = ""
    with pytest.raises(CommandError, match="set HUGGINGFACE_TOKEN"):
        call_command("push_snapshot")
    settings.HUGGINGFACE_TOKEN = TOKEN
    settings.HUGGINGFACE_DATASET_REPO = ""
    with pytest.raises(CommandError, match="No repository"):
        call_command("push_snapshot")
    with pytest.raises(CommandError, match="is not a Hub repository id"):
        call_command("push_snapshot", "--repo", "no-owner")
    assert hub.requests == []


def test_a_stored_file_that_differs_from_the_build_is_not_pushed(hub, built, snapshot_folder):
    (snapshot_folder / f"v{built.version}" / "battles.jsonl").write_text("{}\n")

    with pytest.raises(AnnotationError, match="the stored battles.jsonl is not the file the build wrote"):
        push_snapshot(snapshot=built, repo_id=REPO, token=TOKEN)
    assert hub.requests == []


def test_only_a_done_snapshot_is_pushed(hub):
    pending = snapshots.request_snapshot(background=False)

    with pytest.raises(AnnotationError, match="is not built"):
        push_snapshot(snapshot=pending, repo_id=REPO, token=TOKEN)
    with pytest.raises(CommandError, match="No done snapshot v7"):
        call_command("push_snapshot", "7")


def test_a_hub_whose_xet_storage_fails_is_a_clear_error(hub, built, monkeypatch):
    # With hf_xet installed the client uploads the Parquet files through Xet, which the loopback
    # Hub does not speak: the failure must reach the researcher as a message, and no commit is made.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", False)

    with pytest.raises(CommandError, match="The Hub's storage did not take the files of Snapshot v1"):
        call_command("push_snapshot")
    assert hub.dataset(REPO).commits == []
    assert any(request.path == f"/api/datasets/{REPO}/xet-write-token/main" for request in hub.requests)
