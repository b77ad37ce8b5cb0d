import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from annotation.collection.progress import format_table2, stage_progress, table2
from annotation.models import Assignment, Instance, Reference, Stage, WorkUnit
from tests.factories import (
    FamilyFactory,
    InstanceFactory,
    ReferenceFactory,
    WorkerFactory,
    launch,
)

pytestmark = pytest.mark.django_db

CORRECT, INCORRECT, PENDING = (Reference.Verdict.CORRECT, Reference.Verdict.INCORRECT,
                               Reference.Verdict.PENDING)


def decided(family, verdict, *, caption=False, response=False, images=None):
    status = {CORRECT: Instance.Status.VERIFIED, INCORRECT: Instance.Status.DISCARDED}.get(
        verdict, Instance.Status.AWAITING_VERIFICATION
    )
    instance = InstanceFactory(family=family, status=status, image_count=images)
    return ReferenceFactory(instance=instance, verdict=verdict, problem_in_caption=caption,
                            problem_in_response=response,
                            decided_at=None if verdict == PENDING else timezone.now())


@pytest.fixture
def rated():
    """Single-image: 3 correct, 1 wrong response. Multi-image: 1 correct, 1 wrong caption."""
    single, multi = FamilyFactory(), FamilyFactory(is_multi_image=True)
    for _ in range(3):
        decided(single, CORRECT)
    decided(single, INCORRECT, response=True)
    decided(multi, CORRECT)
    decided(multi, INCORRECT, caption=True)
    return single, multi


def test_table2_gives_percentages_of_decided_references_per_column(rated):
    table = table2()
    assert (table.single.correct_pct, table.single.problem_in_caption_pct,
            table.single.problem_in_response_pct) == (75.0, 0.0, 25.0)
    assert (table.multi.correct_pct, table.multi.problem_in_caption_pct,
            table.multi.problem_in_response_pct) == (50.0, 50.0, 0.0)
    assert table.overall.references == 6
    assert table.overall.correct_pct == pytest.approx(100 * 4 / 6)
    assert table.overall.problem_in_caption_pct == pytest.approx(100 / 6)


def test_table2_leaves_out_pending_references(rated):
    single, _ = rated
    decided(single, PENDING)
    assert table2().single.references == 4


def test_instance_with_several_images_counts_as_multi_in_a_single_image_family():
    family = FamilyFactory(is_multi_image=False)
    decided(family, CORRECT, images=3)
    decided(family, INCORRECT, response=True, images=1)
    table = table2()
    assert (table.single.references, table.multi.references) == (1, 1)
    assert table.multi.correct_pct == 100.0


def test_yield_is_verified_over_verified_and_discarded_instances(rated):
    single, _ = rated
    InstanceFactory(family=single, status=Instance.Status.AWAITING_VERIFICATION)
    table = table2()
    assert (table.single.verified, table.single.ended) == (3, 4)
    assert table.single.yield_pct == 75.0
    assert table.overall.yield_pct == pytest.approx(100 * 4 / 6)


def test_table2_for_one_family_counts_only_its_references(rated):
    _, multi = rated
    table = table2(family=multi)
    assert table.overall.references == 2
    assert table.single.references == 0
    assert table.single.correct_pct is None


def test_human_written_imported_reference_is_not_a_rated_candidate():
    family = FamilyFactory()
    reference = decided(family, CORRECT)
    Reference.objects.filter(pk=reference.pk).update(source=Reference.Source.IMPORTED, model="")
    table = table2()
    assert table.overall.references == 0
    assert table.overall.ended == 0


def test_format_table2_lays_out_the_papers_rows_with_a_dash_for_an_empty_column(rated):
    _, multi = rated
    text = format_table2(table2(family=multi))
    lines = text.splitlines()
    assert lines[0] == f"Table 2: human rating metrics for “{multi.name}”"
    assert lines[1].split() == ["Metrics", "Overall", "Single", "Multi"]
    assert lines[2].split() == ["GPT-4", "Correct", "(%)", "50.0", "-", "50.0"]
    assert lines[3].split()[-3:] == ["50.0", "-", "50.0"]
    assert lines[4].split()[-3:] == ["0.0", "-", "0.0"]


def test_table2_command_prints_the_table(rated):
    out = io.StringIO()
    call_command("table2", stdout=out)
    assert "GPT-4 Correct (%)" in out.getvalue()
    assert "66.7     75.0     50.0" in out.getvalue()


def test_table2_command_filters_by_family(rated):
    single, _ = rated
    out = io.StringIO()
    call_command("table2", "--family", single.name, stdout=out)
    assert f"for “{single.name}”" in out.getvalue()
    assert "75.0     75.0        -" in out.getvalue()


def test_table2_command_refuses_an_unknown_family():
    with pytest.raises(CommandError, match="No instruction family is named “Nope”"):
        call_command("table2", "--family", "Nope", stdout=io.StringIO())


def test_stage_progress_counts_waiting_leased_done_and_discarded_units():
    family = FamilyFactory()
    launch(family, Stage.CAPTION, overlap=2)
    now = timezone.now()
    kept, dropped = InstanceFactory(family=family), InstanceFactory(family=family)
    Instance.objects.filter(pk=dropped.pk).update(status=Instance.Status.DISCARDED)

    def unit(key, instance, status=WorkUnit.Status.OPEN):
        return WorkUnit.objects.create(stage=Stage.CAPTION, key=key, family=family,
                                       instance=instance, overlap=2, status=status)

    def lease(unit, minutes, status=Assignment.Status.LEASED):
        return Assignment.objects.create(unit=unit, worker=WorkerFactory(), status=status,
                                         lease_expires_at=now + timedelta(minutes=minutes))

    unit("a", kept)
    one_lease = unit("b", kept)
    lease(one_lease, 10)
    full = unit("c", kept)
    lease(full, 10)
    lease(full, 10, status=Assignment.Status.SUBMITTED)
    expired = unit("d", kept)
    lease(expired, -5)
    unit("e", dropped, status=WorkUnit.Status.DONE)
    unit("f", dropped, status=WorkUnit.Status.DONE)

    progress = stage_progress(family)
    rows = {row["stage"]: row for row in progress}
    caption = rows[Stage.CAPTION]
    assert caption["launched"]
    assert (caption["waiting"], caption["leased"], caption["done"], caption["discarded"]) == (
        3, 2, 2, 1,
    )
    assert progress.instances[Instance.Status.DISCARDED] == 1
    assert progress.instances[Instance.Status.AWAITING_CAPTION] == 1
    verification = rows[Stage.VERIFICATION]
    assert not verification["launched"]
    assert (verification["waiting"], verification["leased"], verification["done"]) == (0, 0, 0)
