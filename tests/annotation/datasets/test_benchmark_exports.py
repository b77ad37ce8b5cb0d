"""Every export holds exactly what annotation/models/benchmark.py says is in the benchmark.

One world holds each kind of row the benchmark must tell apart: an instance verified through the
crowd, one verified on a caption that review then rejected, one our verifiers discarded, and the
published multi-image sheet re-imported (its rows rated incorrect without a reference come in as
discarded). Every file of a snapshot (driven by the registry of its outputs, manifest.OUTPUTS), every
Hugging Face config its card declares, every family sheet the admin offers and the API's benchmark
listing are read back and compared with the selector, so an export added later is checked at once.
"""

import csv
import io
import json

import pandas as pd
import pytest
import yaml
from django.contrib.auth import get_user_model
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.admin.families import family_sheets
from annotation.collection import captions, references, verification
from annotation.crowdwork import queue, review, stages
from annotation.datasets import formats, layouts, manifest, snapshots
from annotation.datasets.imports import import_visit_bench
from annotation.models import HumanJudgement, Instance, Reference, Stage, Tournament, multi_image_q
from annotation.models.benchmark import benchmark_instances
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from tests.factories import FamilyFactory, InstanceFactory, WorkerFactory, launch
from tests.published_data import MULTI
from tests.scoring_factories import create_tournament, with_responses

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def _through_the_crowd(family, *, correct):
    """An instance captioned and verified by workers; returns it and its caption's assignment."""
    instance = InstanceFactory(family=family)
    stages.create_work_units(family=family, stage=Stage.CAPTION, instance=instance)
    author = WorkerFactory()
    lease = queue.next_assignment(worker=author, stage=Stage.CAPTION)
    captions.submit_caption(assignment_id=lease.pk, worker=author,
                            texts=[f"A red bicycle leans against a blue door ({instance.pk})."])
    references.store_reference(instance=Instance.objects.get(pk=instance.pk), text=f"Red. ({instance.pk})",
                               source=Reference.Source.MANUAL)
    verifier = WorkerFactory()
    vote = queue.next_assignment(worker=verifier, stage=Stage.VERIFICATION)
    verification.submit_verification(assignment_id=vote.pk, worker=verifier, is_correct=correct,
                                     problem_in_response=not correct)
    instance.refresh_from_db()
    return instance, lease


def _judge_every_battle():
    while (lease := queue.next_assignment(worker=(judge := WorkerFactory()), stage=Stage.PAIRWISE)) is not None:
        submit_pairwise_judgement(assignment_id=lease.pk, worker=judge, choice="left")


@pytest.fixture
def world(snapshot_folder):
    import_visit_bench(path_or_file=MULTI)
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    launch(family, Stage.VERIFICATION)
    kept, _ = _through_the_crowd(family, correct=True)
    rejected, caption_lease = _through_the_crowd(family, correct=True)
    discarded, _ = _through_the_crowd(family, correct=False)
    for instance in (kept, rejected):
        with_responses(instance, "llava", "otter")
    launch_tournament(tournament=create_tournament(name="Both", families=[family], include_reference=True,
                                                   judgements_per_pair=1))
    _judge_every_battle()
    outcome = review.reject_work(assignments=[caption_lease], reason="The caption is not about this image.")
    snapshot = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(
        background=False, tournaments=Tournament.objects.all()))
    return {"kept": kept, "rejected": rejected, "discarded": discarded, "family": family,
            "outcome": outcome, "snapshot": snapshot, "folder": snapshot_folder / f"v{snapshot.version}"}


def _instance_by_key():
    """{(instruction, image URLs): instance id}, to name the rows of a file without an instance_id."""
    found = {}
    for instance in Instance.objects.prefetch_related("instanceimage_set__image"):
        urls = tuple(link.image.url for link in instance.instanceimage_set.order_by("position"))
        found[(instance.instruction, urls)] = instance.pk
    return found


def _urls(cell):
    cell = cell.lstrip("'")
    return tuple(json.loads(cell)) if cell.startswith("[") else (cell,)


def _instance_ids(frame):
    if "instance_id" in frame.columns:
        return [int(value) for value in frame["instance_id"]]
    keys = _instance_by_key()
    image = next(column for column in ("image", "images", "image_url") if column in frame.columns)
    return [keys[(instruction.lstrip("'"), _urls(cell))]
            for instruction, cell in zip(frame["instruction"], frame[image], strict=True)]


def _read(path):
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".jsonl":
        text = path.read_text(encoding="utf-8")
        return pd.read_json(io.StringIO(text), lines=True) if text else pd.DataFrame(
            columns=["instruction", "image_url"])
    return pd.read_csv(path, keep_default_na=False, dtype=str)


def _benchmark(kind=None):
    instances = benchmark_instances()
    if kind == layouts.MULTI_IMAGE:
        instances = instances.filter(multi_image_q())
    elif kind is not None:
        instances = instances.exclude(multi_image_q())
    return set(instances.values_list("pk", flat=True))


def _judged():
    """The instances of the judgements a snapshot holds: counted, on benchmark instances."""
    return set(HumanJudgement.objects.counted().filter(battle__instance__in=benchmark_instances())
               .values_list("battle__instance_id", flat=True))


# What each table holds, by the name of the table: a snapshot output without one fails the test.
EXPECTED = {
    formats.SINGLE_IMAGE_SHEET.name: lambda: _benchmark(layouts.SINGLE_IMAGE),
    formats.MULTI_IMAGE_SHEET.name: lambda: _benchmark(layouts.MULTI_IMAGE),
    formats.FULLY_ANNOTATED_SHEET.name: lambda: _benchmark(layouts.FULLY_ANNOTATED),
    formats.HUMAN_PREFERENCES.name: _judged,
    formats.HUMAN_PREFERENCES_WIDE.name: _judged,
    # No judge run in this world: the battles file must still hold nothing outside the benchmark.
    formats.BATTLES.name: lambda: set(),
}


def test_the_selector_keeps_counted_verified_work_and_nothing_else(world):
    inside = _benchmark()
    discarded_rows = set(Instance.objects.filter(status=Instance.Status.DISCARDED, imported_from__gt="")
                         .values_list("pk", flat=True))
    assert len(discarded_rows) == 9  # the published rows rated incorrect without a reference
    assert world["kept"].pk in inside
    assert not inside & ({world["rejected"].pk, world["discarded"].pk} | discarded_rows)
    assert len(inside) == 1 + 91
    assert not Instance.objects.filter(pk__in=inside, reference_output__regex=r"^\s*$").exists()


def test_the_review_says_the_instance_leaves_the_benchmark_and_asks_for_a_new_caption(world):
    rejected = Instance.objects.get(pk=world["rejected"].pk)
    assert rejected.status == Instance.Status.AWAITING_CAPTION
    assert f"Instance #{rejected.pk} leaves the benchmark" in world["outcome"].message("rejected")
    assert not rejected.references.exclude(verdict=Reference.Verdict.WITHDRAWN).exists()
    assert queue.next_assignment(worker=WorkerFactory(), stage=Stage.CAPTION).unit.instance_id == rejected.pk


def test_every_snapshot_file_holds_exactly_the_benchmark(world):
    assert set(EXPECTED) == {output.table.name for output in manifest.OUTPUTS}
    written = {entry["name"] for entry in world["snapshot"].files}
    assert _judged() == {world["kept"].pk}
    for output in manifest.OUTPUTS:
        for name in output.names().values():
            assert name in written
            ids = _instance_ids(_read(world["folder"] / name))
            assert set(ids) == EXPECTED[output.table.name](), name
            if output.sheet_kind is not None:
                assert len(ids) == len(set(ids)), name


def test_every_hugging_face_config_holds_exactly_the_benchmark(world):
    card = (world["folder"] / manifest.CARD_NAME).read_text(encoding="utf-8")
    front = yaml.safe_load(card.split("---\n")[1])
    configs = {config["config_name"]: config for config in front["configs"]}
    assert configs[manifest.DEFAULT_CONFIG].get("default") is True
    for name, config in configs.items():
        frame = pd.read_parquet(world["folder"] / config["data_files"][0]["path"])
        assert set(_instance_ids(frame)) == EXPECTED[name](), name
        if "reference_output" in frame.columns:
            verified = [reference or (prediction and correct) for reference, prediction, correct in zip(
                frame["reference_output"], frame["gpt4_prediction"], frame["human_ratings_gpt4_correct"],
                strict=True)]
            assert all(verified), name


def test_every_family_sheet_the_admin_offers_holds_exactly_the_familys_benchmark(world, admin_client,
                                                                                admin_user):
    offered = family_sheets(admin_user)
    for sheet in offered:
        response = admin_client.get(reverse("admin:annotation_instructionfamily_sheet",
                                            args=[sheet["family_id"], sheet["kind"]]))
        rows = list(csv.DictReader(io.StringIO(response.content.decode())))
        assert {int(row["instance_id"]) for row in rows} == set(
            benchmark_instances().filter(family_id=sheet["family_id"]).values_list("pk", flat=True)
        ) & _benchmark(sheet["kind"])
    families = {sheet["family_id"] for sheet in offered}
    assert families == set(benchmark_instances().values_list("family_id", flat=True))


def test_the_apis_benchmark_listing_is_the_selector(world):
    user = get_user_model().objects.create_superuser("api-reader", password="pw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    inside = client.get("/api/instances/", {"in_benchmark": "true", "page_size": 500}).json()
    outside = client.get("/api/instances/", {"in_benchmark": "false", "page_size": 500}).json()
    assert {row["id"] for row in inside["results"]} == _benchmark()
    everything = set(Instance.objects.values_list("pk", flat=True))
    assert {row["id"] for row in outside["results"]} == everything - _benchmark()
