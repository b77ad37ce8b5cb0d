"""A snapshot as a Hugging Face dataset (issue 29, part 3): its card's front matter, read by the real
`datasets` package, and the licences its images carry, in the card and in each instance's
public_images_metadata."""

import csv
import io
import json
from collections import Counter

import datasets
import pytest
import yaml
from django.core.management import call_command

from annotation.datasets import licences, manifest, snapshots
from annotation.datasets.exports import export_sheet
from annotation.datasets.imports import import_visit_bench
from annotation.datasets.layouts import MULTI_IMAGE, SINGLE_IMAGE
from annotation.models import ImageAsset, Instance
from annotation.models.benchmark import benchmark_instances
from tests.export_fixtures import judged_tournament_with_criteria_fixture  # noqa: F401
from tests.factories import FamilyFactory, ImageAssetFactory
from tests.published_data import DATA, benchmark_part
from tests.scoring_factories import verified_instance

pytestmark = pytest.mark.django_db

CC0 = {"licence": "CC0 1.0", "licence_url": "https://creativecommons.org/publicdomain/zero/1.0/"}
CC_BY_4 = {"licence": "CC BY 4.0", "licence_url": "https://creativecommons.org/licenses/by/4.0/"}
# What datasets.Features gives for each of our Arrow type names.
EXPECTED_FEATURES = {
    "bool": datasets.Value("bool"),
    "string": datasets.Value("string"),
    "int64": datasets.Value("int64"),
    "double": datasets.Value("float64"),
    "list<item: string>": datasets.List(datasets.Value("string")),
}


@pytest.fixture(autouse=True)
def _media_and_snapshots_in_folders_of_the_test(settings, tmp_path, snapshot_folder):
    settings.MEDIA_ROOT = tmp_path / "media"


def _snapshot(**options):
    return snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False, **options))


def _front_matter(folder):
    card = (folder / manifest.CARD_NAME).read_text(encoding="utf-8")
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1]), card


def _load(folder, config, tmp_path):
    return datasets.load_dataset(str(folder), config, split=manifest.SPLIT,
                                 cache_dir=str(tmp_path / "hf-cache"))


def _published(instance):
    """The instance with the verified reference that puts it in the benchmark sheets."""
    instance.references.create(caption=instance.current_caption, model="gpt-4",
                               text="A candidate reference.", verdict="correct")
    return instance


def _single_image_instance(image):
    instance = verified_instance(image_count=1)
    link = instance.instanceimage_set.get()
    link.image = image
    link.save()
    return _published(instance)


@pytest.mark.integration
def test_a_demo_snapshot_loads_with_datasets_per_config_with_the_declared_types(
        judged_tournament_with_criteria, snapshot_folder, tmp_path):
    tournament, _ = judged_tournament_with_criteria
    call_command("load_demo")

    snapshot = _snapshot(tournaments=[tournament])

    folder = snapshot_folder / f"v{snapshot.version}"
    front, _ = _front_matter(folder)
    declared = {config["config_name"]: config for config in front["dataset_info"]}
    assert [config["config_name"] for config in front["configs"]] == [
        output.table.name for output in manifest.OUTPUTS]
    for output in manifest.OUTPUTS:
        name = output.table.name
        table = _load(folder, name, tmp_path)
        assert table.num_rows == snapshot.manifest["rows"][name] > 0, name
        assert table.column_names == [feature["name"] for feature in declared[name]["features"]]
        assert dict(table.features) == {column.name: EXPECTED_FEATURES[column.type]
                                        for column in output.table.columns}, name
    single = _load(folder, "visit_bench_single_image", tmp_path)
    demo_ids = set(Instance.objects.filter(family__name__in=_demo_family_names())
                   .values_list("pk", flat=True))
    rows = [row for row in single if row["instance_id"] in demo_ids]
    assert rows and all(type(row["instance_id"]) is int and type(row["human_ratings_gpt4_correct"]) is bool
                        for row in rows)
    battles = _load(folder, "battles", tmp_path)
    first = battles[0]
    assert type(first["auto_evaluation_result"]) is list and len(first["auto_evaluation_result"]) == 2
    assert type(first["evaluated_with_reference"]) is bool
    wide = _load(folder, "human_preferences_wide", tmp_path)
    assert type(wide[0]["time_taken_seconds"]) is float and type(wide[0]["battle_id"]) is int
    assert type(wide[0]["model_selection.A"]) is bool


def _demo_family_names():
    from fixtures.demo import FAMILIES

    return [spec.name for spec in FAMILIES]


@pytest.mark.integration
def test_a_demo_snapshot_without_tournaments_declares_only_the_tables_with_rows_and_each_loads(
        snapshot_folder, tmp_path):
    call_command("load_demo")

    snapshot = _snapshot()

    folder = snapshot_folder / f"v{snapshot.version}"
    front, _ = _front_matter(folder)
    rows = snapshot.manifest["rows"]
    declared = [config["config_name"] for config in front["configs"]]
    assert declared == [output.table.name for output in manifest.OUTPUTS if rows[output.table.name]]
    assert "visit_bench_single_image" in declared and "battles" not in declared
    for name in declared:
        assert _load(folder, name, tmp_path).num_rows == rows[name]
    with pytest.raises(ValueError, match="battles"):
        _load(folder, "battles", tmp_path)


@pytest.mark.integration
def test_a_demo_snapshot_card_states_the_licences_its_images_carry(snapshot_folder):
    call_command("load_demo")

    snapshot = _snapshot()

    front, card = _front_matter(snapshot_folder / f"v{snapshot.version}")
    published = ImageAsset.objects.filter(instances__in=benchmark_instances()).distinct()
    carried = Counter((image.licence, image.licence_url) for image in published)
    assert carried and all(licence for licence, _ in carried), "every demo image records its licence"
    assert {(entry["licence"], entry["licence_url"]): entry["images"]
            for entry in snapshot.manifest["image_licences"]} == carried
    identifiers = {licences.hub_licence(licence=licence, licence_url=url) for licence, url in carried}
    assert front["license"] == (identifiers.pop() if len(identifiers) == 1 else "other")
    if front["license"] == "other":
        # The Hub has no identifier for the Public Domain Mark, so the card names the licence.
        [(licence, url)] = carried if len(carried) == 1 else [("mixed image licences", None)]
        assert front["license_name"] == licence.lower().replace(" ", "-")
        assert front.get("license_link") == url
    for (licence, url), count in carried.items():
        identifier = licences.hub_licence(licence=licence, licence_url=url)
        assert f"| [{licence}](<{url}>) | `{identifier}` | {count} |" in card
    assert "license: cc-by-4.0" not in card


def test_a_card_declares_the_one_licence_every_image_shares_and_names_no_other(snapshot_folder):
    for n in range(2):
        _single_image_instance(ImageAssetFactory(author=f"Author {n}", **CC0))

    snapshot = _snapshot()

    front, card = _front_matter(snapshot_folder / f"v{snapshot.version}")
    assert front["license"] == "cc0-1.0" and "license_name" not in front
    assert snapshot.manifest["image_attributions"] == []
    assert "### Attribution" not in card


def test_differing_licences_give_other_with_a_table_and_the_attributions_they_ask_for(snapshot_folder):
    _single_image_instance(ImageAssetFactory(author="Ann Example", **CC0))
    attributed = ImageAssetFactory(author="Bo | Pipes", source_url="https://openverse.org/image/1", **CC_BY_4)
    _single_image_instance(attributed)

    snapshot = _snapshot()

    front, card = _front_matter(snapshot_folder / f"v{snapshot.version}")
    assert front["license"] == "other"
    assert "| [CC0 1.0](<https://creativecommons.org/publicdomain/zero/1.0/>) | `cc0-1.0` | 1 |" in card
    assert "| [CC BY 4.0](<https://creativecommons.org/licenses/by/4.0/>) | `cc-by-4.0` | 1 |" in card
    assert snapshot.manifest["image_attributions"] == [
        {"image": attributed.url, "author": "Bo | Pipes", "source": "https://openverse.org/image/1", **CC_BY_4}]
    assert (f"| {attributed.url} | Bo \\| Pipes | https://openverse.org/image/1 | CC BY 4.0 |") in card
    assert "Ann Example" not in card


def test_an_uploaded_images_licence_author_and_source_travel_into_the_exported_metadata():
    image = ImageAssetFactory(author="Ann Example", source_url="https://openverse.org/image/7", **CC0)
    _single_image_instance(image)

    buffer = io.StringIO(newline="")
    export_sheet(kind=SINGLE_IMAGE, csv_file=buffer)

    [row] = csv.DictReader(io.StringIO(buffer.getvalue()))
    assert json.loads(row["public_images_metadata"]) == {
        "License": CC0["licence_url"], "LicenseName": "CC0 1.0", "Author": "Ann Example",
        "OriginalLandingURL": "https://openverse.org/image/7"}


def test_a_multi_image_instance_lists_each_images_metadata_in_the_order_of_its_images():
    instance = _published(verified_instance(family=FamilyFactory(is_multi_image=True), image_count=2))
    first, second = (link.image for link in instance.instanceimage_set.order_by("position"))
    ImageAsset.objects.filter(pk=first.pk).update(author="First", **CC0)
    ImageAsset.objects.filter(pk=second.pk).update(author="Second", licence="CC BY 4.0", licence_url="")

    buffer = io.StringIO(newline="")
    export_sheet(kind=MULTI_IMAGE, csv_file=buffer)

    [row] = csv.DictReader(io.StringIO(buffer.getvalue()))
    assert json.loads(row["images"]) == [first.url, second.url]
    assert json.loads(row["public_images_metadata"]) == {"images": [
        {"License": CC0["licence_url"], "LicenseName": "CC0 1.0", "Author": "First"},
        {"LicenseName": "CC BY 4.0", "Author": "Second"},
    ]}


def test_metadata_a_published_sheet_gave_is_kept_as_published():
    instance = _single_image_instance(ImageAssetFactory(**CC0))
    instance.public_images_metadata = {"public_domain_url": "https://example.org/original.jpg"}
    instance.save()

    buffer = io.StringIO(newline="")
    export_sheet(kind=SINGLE_IMAGE, csv_file=buffer)

    [row] = csv.DictReader(io.StringIO(buffer.getvalue()))
    assert json.loads(row["public_images_metadata"]) == {"public_domain_url": "https://example.org/original.jpg"}


@pytest.mark.parametrize(("licence", "licence_url", "identifier"), [
    ("CC0 1.0", "https://creativecommons.org/publicdomain/zero/1.0/", "cc0-1.0"),
    ("CC0", "", "cc0-1.0"),
    ("CC BY 2.0", "https://creativecommons.org/licenses/by/2.0/", "cc-by-2.0"),
    ("", "https://creativecommons.org/licenses/by/2.0/", "cc-by-2.0"),
    ("CC BY 4.0", "", "cc-by-4.0"),
    ("cc-by-sa-4.0", "", "cc-by-sa-4.0"),
    ("CC BY-NC-SA 4.0", "", "cc-by-nc-sa-4.0"),
    # The Hub has no identifier for these.
    ("CC BY-SA 2.0", "https://creativecommons.org/licenses/by-sa/2.0/", "other"),
    ("Public Domain Mark 1.0", "https://creativecommons.org/publicdomain/mark/1.0/", "other"),
    ("No known copyright restrictions", "https://www.brooklynmuseum.org/opencollection/archives/image/51611",
     "other"),
    ("", "", "unknown"),
])
def test_licences_map_to_the_hubs_identifiers(licence, licence_url, identifier):
    assert licences.hub_licence(licence=licence, licence_url=licence_url) == identifier


@pytest.mark.parametrize(("licence", "licence_url", "attribution"), [
    ("CC0 1.0", "https://creativecommons.org/publicdomain/zero/1.0/", False),
    ("Public domain", "https://creativecommons.org/publicdomain/mark/1.0/", False),
    ("CC BY 2.0", "https://creativecommons.org/licenses/by/2.0/", True),
    ("No known copyright restrictions", "", True),
])
def test_only_cc0_and_the_public_domain_waive_attribution(licence, licence_url, attribution):
    assert licences.needs_attribution(licence=licence, licence_url=licence_url) is attribution


@pytest.mark.integration
def test_the_published_sheets_open_images_licences_are_recorded_on_import_and_stated_in_the_card(snapshot_folder):
    import_visit_bench(path_or_file=DATA / "visit_bench_single_image.csv")
    # The snapshot states the licences of the images in the benchmark.
    part = io.StringIO(benchmark_part(DATA / "visit_bench_single_image.csv"), newline="")
    licensed = {row["image"]: json.loads(row["public_images_metadata"]) for row in csv.DictReader(part)
                if "License" in json.loads(row["public_images_metadata"])}

    snapshot = _snapshot()

    image = ImageAsset.objects.get(url=next(iter(licensed)))
    published = licensed[image.url]
    assert (image.licence, image.licence_url, image.author, image.source_url) == (
        "CC BY 2.0", published["License"], published["Author"], published["OriginalLandingURL"])
    by_identifier = Counter()
    for entry in snapshot.manifest["image_licences"]:
        by_identifier[entry["hub_licence"]] += entry["images"]
    # An image's licence may come from a row outside the benchmark that shows the same image.
    in_benchmark = ImageAsset.objects.filter(instances__in=benchmark_instances()).distinct()
    with_licence = in_benchmark.filter(licence="CC BY 2.0").count()
    assert with_licence >= len(licensed)
    assert by_identifier == {"cc-by-2.0": with_licence, "unknown": in_benchmark.count() - with_licence}
    front, card = _front_matter(snapshot_folder / f"v{snapshot.version}")
    assert front["license"] == "other" and front["license_name"] == "mixed-image-licences"
    assert len(snapshot.manifest["image_attributions"]) == with_licence
    assert f"| {image.url} | {published['Author']} | {published['OriginalLandingURL']} | CC BY 2.0 |" in card
    # The sheet still comes back as published, less the rows that are not in the benchmark.
    assert (snapshot_folder / f"v{snapshot.version}" / "visit_bench_single_image.csv").read_bytes() == (
        benchmark_part(DATA / "visit_bench_single_image.csv").encode())


def test_an_exported_multi_image_rows_metadata_gives_each_image_its_licence_back():
    metadata = {"images": [
        {"License": CC0["licence_url"], "LicenseName": "CC0 1.0", "Author": "First"},
        {"Author": "Only an author"},
    ]}

    assert licences.published_image_details(metadata, 2) == [
        {"licence": "CC0 1.0", "licence_url": CC0["licence_url"], "author": "First"}, {}]
    assert licences.published_image_details(metadata, 3) == [{}, {}, {}]
    assert licences.published_image_details({"License": "not a link"}, 1) == [{}]
