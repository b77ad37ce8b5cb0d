"""Every way a reference is verified makes it the instance's verified reference, which then takes
part in battles (as the "human-verified reference" model), in the reference-backed judge's prompt
and in every export: the crowd's verdict on a generated or a pasted candidate, and a published
sheet's verdict, imported by command or on the admin's import page."""

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import Q
from django.urls import reverse

from annotation.collection import verification
from annotation.collection.references import add_manual_reference, generate_reference, store_reference
from annotation.crowdwork import queue
from annotation.datasets import exports, layouts, snapshots
from annotation.datasets.imports import import_visit_bench
from annotation.datasets.sheets import parse_boolean
from annotation.exceptions import AnnotationError
from annotation.judging.prompts import pairwise_request
from annotation.models import (
    REFERENCE_MODEL_NAME,
    Battle,
    ImportedRow,
    Instance,
    JudgeRun,
    Reference,
    Stage,
)
from annotation.models.benchmark import benchmark_instances
from annotation.preferences.predictions import import_predictions
from tests.factories import WorkerFactory, awaiting_reference, launch
from tests.openai_fake import completion
from tests.published_data import MULTI, PREDICTIONS, SINGLE, benchmark_part
from tests.scoring_factories import create_tournament, with_responses

pytestmark = pytest.mark.django_db

GENERATED = "The sheep are grazing; three of them stand near the gate."
PASTED = "Three sheep graze on the hill, one beside the gate."


@pytest.fixture(autouse=True)
def _snapshots_in_a_folder_of_the_test(snapshot_folder):
    return snapshot_folder


# --- where a verified reference must arrive ------------------------------------------------------


def battle_reference(instance):
    """The text the instance's "human-verified reference" shows in a tournament of its family."""
    tournament = create_tournament(name=f"Tournament of #{instance.pk}", families=[instance.family])
    battles = Battle.objects.filter(tournament=tournament, instance=instance).select_related(
        "response_a", "response_b")
    with_reference = battles.filter(Q(response_a__model_name=REFERENCE_MODEL_NAME)
                                    | Q(response_b__model_name=REFERENCE_MODEL_NAME))
    texts = {response.text for battle in with_reference
             for response in (battle.response_a, battle.response_b)
             if response.model_name == REFERENCE_MODEL_NAME}
    assert len(texts) <= 1
    return texts.pop() if texts else None


def judge_reference(instance):
    """The "High quality reference" the reference-backed judge is shown for the instance."""
    request = pairwise_request(mode=JudgeRun.Mode.REFERENCE_BACKED, model="gpt-4", instance=instance,
                               first="Response one.", second="Response two.")
    prompt = request["messages"][-1]["content"]
    start = prompt.index("High quality reference: ") + len("High quality reference: ")
    return prompt[start:prompt.index("\nResponse A: ", start)]


def kind_of(instance):
    return layouts.MULTI_IMAGE if instance.is_multi_image else layouts.SINGLE_IMAGE


def sheet_row(instance):
    """The instance's row of its family's sheet (the one a researcher adds predictions to)."""
    handle = io.StringIO(newline="")
    exports.export_sheet(kind=kind_of(instance), csv_file=handle,
                         instances=Instance.objects.filter(family=instance.family))
    rows = {row["instance_id"]: row for row in csv.DictReader(io.StringIO(handle.getvalue(), newline=""))}
    return rows[str(instance.pk)]


def snapshot_references(instance):
    """What a snapshot's files say the instance's reference is: its benchmark sheet's
    reference_output, and its fully annotated file's output (single-image instances only).

    A sheet imported alone is written back as published (no instance_id): its row is found by
    the sheet's row number and read as its authors wrote it, reference_output or else the
    candidate rated correct."""
    snapshot = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False))

    def rows(name):
        with snapshots.snapshot_storage().open(f"v{snapshot.version}/{name}", "rb") as handle:
            return list(csv.DictReader(io.StringIO(handle.read().decode("utf-8"), newline="")))

    sheet = rows("visit_bench_multi_images.csv" if instance.is_multi_image else "visit_bench_single_image.csv")
    if "instance_id" in sheet[0]:
        found = [next(row for row in sheet if row["instance_id"] == str(instance.pk))["reference_output"]]
    else:
        # The sheet is written as published, less the rows that are not in the benchmark.
        imported = ImportedRow.objects.get(instance=instance)
        row = sheet[ImportedRow.objects.filter(sheet=imported.sheet, number__lt=imported.number,
                                               instance__in=benchmark_instances()).count()]
        correct = parse_boolean(row["human_ratings_gpt4_correct"])
        found = [row["reference_output"] or (row["gpt4_prediction"] if correct else "")]
    if not instance.is_multi_image:
        annotated = rows("visit_fully_annotated.csv")
        found.append(next(row for row in annotated
                          if row["instance_id"] == str(instance.pk))["output_human_annotated"])
    return found


def assert_everywhere(instance, text):
    instance.refresh_from_db()
    assert instance.status == Instance.Status.VERIFIED
    assert instance.reference_output == text
    assert battle_reference(instance) == text
    assert judge_reference(instance) == text.strip()
    assert sheet_row(instance)["reference_output"] == text
    assert set(snapshot_references(instance)) == {text}


def crowd_verifies(*, correct=True):
    worker = WorkerFactory()
    assignment = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
    answer = {"is_correct": True} if correct else {"is_correct": False, "problem_in_response": True}
    return verification.submit_verification(assignment_id=assignment.pk, worker=worker, **answer)


# --- the crowd's verdict ----------------------------------------------------------------------------


def test_a_generated_reference_the_crowd_verifies_takes_part_in_battles_the_judge_and_exports(
        openai_server):
    openai_server.script(completion(GENERATED))
    instance = awaiting_reference()
    launch(instance.family, Stage.VERIFICATION)
    reference = generate_reference(instance=instance)
    crowd_verifies()
    with_responses(instance, "llava")

    reference.refresh_from_db()
    assert reference.verdict == Reference.Verdict.CORRECT
    assert_everywhere(instance, GENERATED)


def test_a_pasted_reference_the_crowd_verifies_takes_part_in_battles_the_judge_and_exports(admin_client):
    instance = awaiting_reference()
    launch(instance.family, Stage.VERIFICATION)
    response = admin_client.post(reverse("admin:annotation_instance_add_reference", args=[instance.pk]),
                                 {"text": PASTED})
    assert response.status_code == 302
    crowd_verifies()
    with_responses(instance, "llava")

    assert instance.references.get().source == Reference.Source.MANUAL
    assert_everywhere(instance, PASTED)


def test_a_reference_pasted_while_the_generated_one_awaits_verification_can_be_the_verified_one(
        openai_server):
    openai_server.script(completion(GENERATED))
    instance = awaiting_reference()
    launch(instance.family, Stage.VERIFICATION, overlap=1)
    generate_reference(instance=instance)
    pasted = add_manual_reference(instance=instance, text=PASTED, user=None)
    # Two verifiers hold the two candidates' units; the pasted one's verdict comes in first.
    leases = [(worker, queue.next_assignment(worker=worker, stage=Stage.VERIFICATION))
              for worker in (WorkerFactory(), WorkerFactory())]
    worker, assignment = next(pair for pair in leases if pair[1].unit.reference_id == pasted.pk)
    verification.submit_verification(assignment_id=assignment.pk, worker=worker, is_correct=True)
    with_responses(instance, "llava")

    assert_everywhere(instance, PASTED)


# --- a published sheet's verdict ------------------------------------------------------------------


def published_rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def instance_of_row(number):
    return ImportedRow.objects.get(number=number).instance


def test_a_sheet_row_rated_correct_without_a_reference_output_has_its_candidate_as_the_verified_reference():
    # Rows are numbered as the import numbers them: the header is row 1.
    rows = published_rows(SINGLE)
    number, row = next((n, r) for n, r in enumerate(rows, start=2)
                       if r["human_ratings_gpt4_correct"] == "TRUE" and not r["reference_output"].strip())
    import_visit_bench(path_or_file=SINGLE)
    # The real predictions of the same release: a second response on every instance (row 390
    # repeats row 154 with another prediction, so the good rows are taken).
    import_predictions(path_or_file=PREDICTIONS, only_good=True)
    instance = instance_of_row(number)

    assert instance.references.get().verdict == Reference.Verdict.CORRECT
    assert_everywhere(instance, row["gpt4_prediction"])


def test_a_sheet_row_whose_candidate_was_wrong_is_verified_with_its_human_written_reference():
    rows = published_rows(SINGLE)
    number, row = next((n, r) for n, r in enumerate(rows, start=2)
                       if r["human_ratings_gpt4_correct"] == "FALSE" and r["reference_output"].strip())
    import_visit_bench(path_or_file=SINGLE)
    import_predictions(path_or_file=PREDICTIONS, only_good=True)
    instance = instance_of_row(number)

    assert instance.references.get().verdict == Reference.Verdict.INCORRECT
    assert_everywhere(instance, row["reference_output"])


def test_a_sheet_imported_on_the_admins_page_gives_rows_rated_correct_their_reference(admin_client):
    rows = published_rows(MULTI)
    number, row = next((n, r) for n, r in enumerate(rows, start=2)
                       if r["human_ratings_gpt4_correct"] == "True" and not r["reference_output"].strip())
    response = admin_client.post(
        reverse("admin:annotation_instructionfamily_import"),
        {"sheet": SimpleUploadedFile(MULTI.name, MULTI.read_bytes(), "text/csv")}, follow=True)
    assert "100 instance(s) imported" in response.content.decode()
    instance = instance_of_row(number)
    with_responses(instance, "otter")
    page = admin_client.get(reverse("admin:annotation_reference_changelist")
                            + f"?instance__id__exact={instance.pk}").content.decode()
    assert "Correct" in page

    assert_everywhere(instance, row["gpt4_prediction"])
    # The family's sheet a researcher downloads from the admin says it too.
    download = admin_client.get(reverse("admin:annotation_instructionfamily_sheet",
                                        args=[instance.family.pk, layouts.MULTI_IMAGE]))
    downloaded = {r["instance_id"]: r for r in csv.DictReader(io.StringIO(download.content.decode(), newline=""))}
    assert downloaded[str(instance.pk)]["reference_output"] == row["gpt4_prediction"]


def test_a_sheet_imported_alone_still_comes_back_as_published_and_reads_as_the_same_reference():
    import_visit_bench(path_or_file=SINGLE)
    snapshot = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False))
    with snapshots.snapshot_storage().open(f"v{snapshot.version}/visit_bench_single_image.csv", "rb") as handle:
        written = handle.read()

    # As published, less the rows rated incorrect without a reference: they are not in the benchmark.
    assert written == benchmark_part(SINGLE).encode()
    for number, row in enumerate(published_rows(SINGLE), start=2):
        instance = instance_of_row(number)
        if instance.status != Instance.Status.VERIFIED:
            continue
        # Read as the sheet's authors wrote it: reference_output, else the candidate rated correct.
        correct = row["human_ratings_gpt4_correct"] == "TRUE"
        meant = row["reference_output"] if row["reference_output"].strip() else (
            row["gpt4_prediction"] if correct else "")
        assert meant == instance.reference_output, f"row {number}"


def test_reimporting_a_sheet_whose_rows_now_hold_their_reference_skips_every_row():
    import_visit_bench(path_or_file=MULTI)

    again = import_visit_bench(path_or_file=MULTI)

    assert (again.created, again.skipped) == (0, 100)


# --- the one door ---------------------------------------------------------------------------------


def test_only_a_reference_verified_correct_can_make_an_instance_verified():
    instance = awaiting_reference()
    launch(instance.family, Stage.VERIFICATION)
    reference = store_reference(instance=instance, text=PASTED, source=Reference.Source.MANUAL)

    with pytest.raises(AnnotationError, match="not a correct reference"):
        verification.verify_instance(instance=instance, reference=reference)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.AWAITING_VERIFICATION and not instance.reference_output
