"""The researcher's big admin lists at campaign size (benchmarks/researcher_pages.py measures them on
a world of a million judgements): figures from other tables are worked out for the page's rows in
a fixed number of queries, searches go field by field through indexes and find what Django's
search found, and sorting by a worked-out figure still works."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation import teams
from annotation.admin import search
from annotation.collection import progress
from annotation.models import (
    Assignment,
    Instance,
    Reference,
    Stage,
    Verification,
    WorkUnit,
    multi_image_q,
)
from tests.factories import FamilyFactory, ImageAssetFactory, InstanceFactory, ReferenceFactory, WorkerFactory

pytestmark = pytest.mark.django_db


def _answer(worker, unit, seconds):
    return Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                     lease_expires_at=timezone.now(), submitted_at=timezone.now(),
                                     active_seconds=seconds)


def _units(count, family=None, stage=Stage.CAPTION):
    family = family or FamilyFactory()
    return [WorkUnit.objects.create(stage=stage, key=f"{stage}-{family.pk}-{n}", family=family)
            for n in range(count)]


def _queries(client, url, params=None):
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, params or {})
    assert response.status_code == 200
    table = response.context["cl"].model._meta.db_table
    listing = [query["sql"] for query in captured if query["sql"].startswith(f'SELECT "{table}"."id"')]
    # The list itself is one plain query: no grouping over the table, no subquery for each row.
    assert len(listing) == 1 and "GROUP BY" not in listing[0] and "(SELECT" not in listing[0]
    return len(captured), response.content.decode()


def test_the_answers_page_shows_each_worker_s_mean_time_at_the_stage_in_queries_that_do_not_grow_with_rows(
        admin_client):
    quick, slow = WorkerFactory(), WorkerFactory()
    units = _units(6)
    _answer(quick, units[0], 10)
    _answer(slow, units[1], 100)
    url = reverse("admin:annotation_answer_changelist")
    few, page = _queries(admin_client, url)
    assert "10 s/task" in page and "100 s/task" in page and "no gold yet" in page

    _answer(quick, units[2], 20)  # quick's mean at the caption stage becomes 15 s
    for unit in units[3:]:
        _answer(WorkerFactory(), unit, 50)
    many, page = _queries(admin_client, url)
    assert many == few
    assert "15 s/task" in page and "100 s/task" in page and "50 s/task" in page
    # Time at another stage is not this stage's time.
    _answer(quick, _units(1, stage=Stage.VERIFICATION)[0], 1000)
    page = admin_client.get(url, {"unit__stage__exact": Stage.CAPTION}).content.decode()
    assert "15 s/task" in page


def test_answers_are_found_by_a_worker_s_id_or_a_unit_s_key_pasted_whole(admin_client):
    worker = WorkerFactory(external_id="A1B2C3D4E5F6G7")
    units = _units(3)
    mine = [_answer(worker, unit, 30) for unit in units[:2]]
    other = _answer(WorkerFactory(), units[2], 30)
    url = reverse("admin:annotation_answer_changelist")
    page = admin_client.get(url, {"q": worker.external_id}).content.decode()
    assert "2 answers to review" in page
    assert "(e.g. battle-1234); each whole." in page  # the search help text
    listed = {answer.pk for answer in admin_client.get(url, {"q": worker.external_id}).context["cl"].result_list}
    assert listed == {answer.pk for answer in mine}
    assert [a.pk for a in admin_client.get(url, {"q": units[2].key}).context["cl"].result_list] == [other.pk]
    # A part of an identifier is not a search for it.
    assert list(admin_client.get(url, {"q": "A1B2C3"}).context["cl"].result_list) == []
    # Two words: answers matching both, as Django's admin search has it.
    both = admin_client.get(url, {"q": f"{worker.external_id} {units[0].key}"}).context["cl"].result_list
    assert [answer.pk for answer in both] == [mine[0].pk]


def test_a_search_that_finds_more_than_a_few_rows_lists_them_all(admin_client, monkeypatch):
    monkeypatch.setattr(search, "FEW_ROWS", 1)
    family = FamilyFactory(name="Street signs")
    _units(3, family=family)
    _units(2, family=FamilyFactory(name="Recipes"))
    response = admin_client.get(reverse("admin:annotation_workunit_changelist"), {"q": "signs"})
    assert {unit.family_id for unit in response.context["cl"].result_list} == {family.pk}
    assert len(response.context["cl"].result_list) == 3


def test_the_references_list_shows_each_reference_s_votes_in_queries_that_do_not_grow_with_rows(admin_client):
    first = ReferenceFactory()
    workers = [WorkerFactory() for _ in range(3)]
    for worker, correct in zip(workers, (True, True, False), strict=True):
        Verification.objects.create(reference=first, worker=worker, is_correct=correct)
    url = reverse("admin:annotation_reference_changelist")
    few, page = _queries(admin_client, url)
    assert "2 correct, 1 incorrect" in page

    for _ in range(5):
        Verification.objects.create(reference=ReferenceFactory(), worker=workers[0], is_correct=False)
    many, page = _queries(admin_client, url)
    assert many == few
    assert page.count("0 correct, 1 incorrect") == 5 and "2 correct, 1 incorrect" in page


def test_references_are_found_by_words_of_their_text_or_their_instance_s_instruction(admin_client):
    otter = ReferenceFactory(text="An otter floats on its back, holding a sea urchin.")
    by_instruction = ReferenceFactory(instance=InstanceFactory(instruction="What is the OTTER eating?"),
                                      text="It eats a clam.")
    ReferenceFactory(text="A heron stands in the reeds.")
    url = reverse("admin:annotation_reference_changelist")

    def found(term):
        return {reference.pk for reference in admin_client.get(url, {"q": term}).context["cl"].result_list}

    assert found("otter") == {otter.pk, by_instruction.pk}
    assert found("otter clam") == {by_instruction.pk}  # one word in the instruction, one in the text
    assert found('"sea urchin"') == {otter.pk}
    assert found("walrus") == set()


def test_the_instances_list_counts_images_per_row_and_sorts_by_them(admin_client):
    family = FamilyFactory()
    one = InstanceFactory(family=family, image_count=1)
    three = InstanceFactory(family=family, image_count=3)
    none = InstanceFactory(family=family, image_count=0)
    url = reverse("admin:annotation_instance_changelist")
    few, _ = _queries(admin_client, url)
    rows = {instance.pk: instance.n_images for instance in admin_client.get(url).context["cl"].result_list}
    assert rows == {one.pk: 1, three.pk: 3, none.pk: 0}
    InstanceFactory.create_batch(4, family=family)
    many, _ = _queries(admin_client, url)
    assert many == few
    column = admin_client.get(url).context["cl"].list_display.index("image_count")
    by_images = admin_client.get(url, {"o": f"-{column}"}).context["cl"].result_list
    assert [instance.pk for instance in by_images][0] == three.pk
    assert admin_client.get(url, {"o": str(column)}).context["cl"].result_list[0].pk == none.pk


def test_the_work_units_list_counts_submitted_answers_per_row_and_sorts_by_them(admin_client):
    units = _units(3)
    for _ in range(2):
        _answer(WorkerFactory(), units[1], 5)
    Assignment.objects.create(unit=units[2], worker=WorkerFactory(), lease_expires_at=timezone.now())  # leased only
    url = reverse("admin:annotation_workunit_changelist")
    rows = {unit.pk: unit.n_submitted for unit in admin_client.get(url).context["cl"].result_list}
    assert rows == {units[0].pk: 0, units[1].pk: 2, units[2].pk: 0}
    column = admin_client.get(url).context["cl"].list_display.index("submitted")
    assert admin_client.get(url, {"o": f"-{column}"}).context["cl"].result_list[0].pk == units[1].pk
    listed = admin_client.get(url, {"q": units[2].key}).context["cl"].result_list
    assert [unit.pk for unit in listed] == [units[2].pk]


def test_images_are_found_by_a_word_of_their_link_or_their_sha256_whole(admin_client):
    image = ImageAssetFactory(url="https://images.example.org/otters/raft.jpg", sha256="ab" * 32)
    ImageAssetFactory()
    url = reverse("admin:annotation_imageasset_changelist")
    assert [row.pk for row in admin_client.get(url, {"q": "otters"}).context["cl"].result_list] == [image.pk]
    assert [row.pk for row in admin_client.get(url, {"q": "ab" * 32}).context["cl"].result_list] == [image.pk]
    assert list(admin_client.get(url, {"q": "abab"}).context["cl"].result_list) == []


def test_a_group_member_s_search_finds_only_their_groups_rows(client):
    vision, speech = teams.create_group(name="Vision lab"), teams.create_group(name="Speech lab")
    member = get_user_model().objects.create_user("vision-researcher", password="pw")
    teams.add_member(group=vision, user=member, role=teams.Role.RESEARCHER)
    worker = WorkerFactory()
    ours = _answer(worker, _units(1, family=FamilyFactory(group=vision))[0], 10)
    _answer(worker, _units(1, family=FamilyFactory(group=speech))[0], 10)
    client.force_login(get_user_model().objects.get(pk=member.pk))
    listed = client.get(reverse("admin:annotation_answer_changelist"), {"q": worker.external_id}).context["cl"]
    assert [answer.pk for answer in listed.result_list] == [ours.pk]


def test_multi_image_read_once_for_every_row_is_the_same_as_counted_per_row():
    single, multi_family = FamilyFactory(), FamilyFactory(is_multi_image=True)
    instances = [InstanceFactory(family=single, image_count=n) for n in (0, 1, 2, 3)]
    instances.append(InstanceFactory(family=multi_family, image_count=1))
    per_row = set(Instance.objects.filter(multi_image_q()).values_list("pk", flat=True))
    once = set(Instance.objects.filter(multi_image_q(every_row=True)).values_list("pk", flat=True))
    assert per_row == once == {instances[2].pk, instances[3].pk, instances[4].pk}
    references = [ReferenceFactory(instance=instance) for instance in instances]
    multi_references = {references[2].pk, references[3].pk, references[4].pk}
    for every_row in (False, True):
        through = Reference.objects.filter(multi_image_q("instance", every_row=every_row))
        assert set(through.values_list("pk", flat=True)) == multi_references


def test_table2_counts_each_instance_once_however_many_references_it_has():
    instance = InstanceFactory(image_count=2, status=Instance.Status.VERIFIED)
    for verdict in (Reference.Verdict.INCORRECT, Reference.Verdict.CORRECT):
        ReferenceFactory(instance=instance, verdict=verdict, decided_by=Reference.DecidedBy.VOTES)
    ReferenceFactory(instance=InstanceFactory(status=Instance.Status.DISCARDED), verdict=Reference.Verdict.INCORRECT)
    table = progress.table2()
    assert (table.multi.references, table.multi.ended, table.multi.verified) == (2, 1, 1)
    assert (table.single.references, table.single.ended, table.single.verified) == (1, 1, 0)
    assert table.decided_by == (("Not recorded", 1), ("Votes (the verification rule)", 2))
    with CaptureQueriesContext(connection) as captured:
        progress.table2()
    assert len(captured) == 1


@pytest.mark.parametrize(("table", "column", "index"), [
    ("annotation_reference", "text", "reference_text_trgm_idx"),
    ("annotation_instance", "instruction", "instance_instruction_trgm_idx"),
    ("annotation_imageasset", "url", "image_asset_search_trgm_idx"),
    ("annotation_imageasset", "licence", "image_asset_search_trgm_idx"),
])
def test_a_word_search_as_django_writes_it_can_use_its_trigram_index(table, column, index):
    if connection.vendor != "postgresql":
        pytest.skip("trigram indexes are PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        # Django's icontains, as the admin's search sends it.
        cursor.execute(f'EXPLAIN SELECT id FROM {table} WHERE UPPER({column}::text) LIKE UPPER(%s)', ["%otter%"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert index in plan


def test_a_unit_key_search_uses_the_key_index():
    if connection.vendor != "postgresql":
        pytest.skip("read from PostgreSQL's plan")
    sql, params = WorkUnit.objects.filter(key="battle-1").values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "work_unit_key_idx" in plan
