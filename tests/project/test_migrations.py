"""Data migrations, run for real on rows written in the schema before them."""

import os
import subprocess
import sys
from datetime import timedelta
from functools import partial

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.paths import PROJECT

BEFORE_WORK_UNIT_BATTLE = ("annotation", "0007_leaderboard_results")
WORK_UNIT_BATTLE = ("annotation", "0008_work_unit_battle")


def migrate_to(*targets):
    """The database migrated to `targets`, and the models as they were there."""
    executor = MigrationExecutor(connection)
    executor.migrate(list(targets))
    return MigrationExecutor(connection).loader.project_state(list(targets)).apps


@pytest.fixture
def latest_schema_afterwards(transactional_db):
    yield
    migrate_to(*MigrationExecutor(connection).loader.graph.leaf_nodes())


def instance_with_two_responses(apps):
    """A family, an instance of it and two models' responses, in the schema `apps` describes."""
    family = apps.get_model("annotation", "InstructionFamily").objects.create(name="Animals")
    instance = apps.get_model("annotation", "Instance").objects.create(family=family, instruction="Why?")
    response = apps.get_model("annotation", "ModelResponse").objects
    a = response.create(instance=instance, model_name="model-a", text="A")
    b = response.create(instance=instance, model_name="model-b", text="B")
    return family, instance, a, b


def test_existing_pairwise_units_are_pointed_at_the_battle_their_key_names(latest_schema_afterwards):
    apps = migrate_to(BEFORE_WORK_UNIT_BATTLE)
    family, instance, a, b = instance_with_two_responses(apps)
    # Before 0009 a tournament was a PreferenceStudy and a battle's field was `study`.
    study = apps.get_model("annotation", "PreferenceStudy").objects.create(name="Tournament")
    battle = apps.get_model("annotation", "Battle").objects.create(
        study=study, instance=instance, response_a=a, response_b=b)
    units = apps.get_model("annotation", "WorkUnit").objects
    pairwise = units.create(stage="pairwise", key=f"battle-{battle.pk}", family=family, instance=instance)
    # Deleting a tournament left its units behind while nothing tied a unit to its battle.
    orphan = units.create(stage="pairwise", key=f"battle-{battle.pk + 1}", family=family)
    caption = units.create(stage="caption", key=f"caption-{instance.pk}-1", family=family, instance=instance)

    units = migrate_to(WORK_UNIT_BATTLE).get_model("annotation", "WorkUnit").objects
    battle_of = dict(units.values_list("pk", "battle_id"))
    assert battle_of == {pairwise.pk: battle.pk, orphan.pk: None, caption.pk: None}


BEFORE_TOURNAMENT = WORK_UNIT_BATTLE
TOURNAMENT = ("annotation", "0009_preference_study_is_tournament")


def test_a_preference_study_becomes_a_tournament_with_its_battles_and_its_groups_permissions(
        latest_schema_afterwards):
    apps = migrate_to(BEFORE_TOURNAMENT)
    family, instance, a, b = instance_with_two_responses(apps)
    study = apps.get_model("annotation", "PreferenceStudy").objects.create(name="Pilot")
    study.families.add(family)
    apps.get_model("annotation", "Battle").objects.create(study=study, instance=instance, response_a=a, response_b=b)
    permission = apps.get_model("auth", "Permission").objects.get(
        content_type__app_label="annotation", codename="view_preferencestudy")
    group = apps.get_model("auth", "Group").objects.create(name="Readers")
    group.permissions.add(permission)

    apps = migrate_to(TOURNAMENT)
    tournament = apps.get_model("annotation", "Tournament").objects.get(name="Pilot")
    assert list(tournament.families.values_list("name", flat=True)) == ["Animals"]
    battle = apps.get_model("annotation", "Battle").objects.get()
    assert battle.tournament_id == tournament.pk
    readers = apps.get_model("auth", "Group").objects.get(name="Readers")
    assert list(readers.permissions.values_list("codename", "name")) == [("view_tournament", "Can view tournament")]
    # The pair stays unique under the renamed column.
    with pytest.raises(IntegrityError), transaction.atomic():
        apps.get_model("annotation", "Battle").objects.create(
            tournament=tournament, instance_id=instance.pk, response_a_id=a.pk, response_b_id=b.pk)


@pytest.fixture
def manage_on_sqlite(tmp_path):
    """`manage.py` against a fresh SQLite file, as `make run` keeps its data; returns its output."""
    environment = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'run.sqlite3'}",
                   "DJANGO_SETTINGS_MODULE": "crowdbench.settings", "PYTHONPATH": str(PROJECT)}

    def manage(*arguments):
        finished = subprocess.run([sys.executable, "manage.py", *arguments, "--verbosity", "0"], cwd=PROJECT,
                                  env=environment, capture_output=True, text=True, timeout=300)
        assert finished.returncode == 0, finished.stderr[-3000:]
        return finished.stdout

    return manage


@pytest.mark.integration
def test_every_migration_applies_and_unapplies_on_sqlite_as_make_run_uses_it(manage_on_sqlite):
    """`make run` keeps its data in SQLite, which rebuilds a table for a schema change where
    PostgreSQL alters it; a migration can pass here on PostgreSQL and fail there."""
    manage_on_sqlite("migrate")
    manage_on_sqlite("migrate", "annotation", BEFORE_WORK_UNIT_BATTLE[1])
    manage_on_sqlite("migrate")


# What `make run` does after migrating, and then a lease on one of the demo's units through the
# queue, its images fetched with it (a JSON aggregate whose SQL differs between the two databases).
_LEASE_A_DEMO_UNIT = """
from annotation.models import InstanceImage, Stage, Worker
from annotation.crowdwork.queue import next_assignment

annotator = Worker.objects.create(platform=Worker.Platform.LOCAL, external_id="sqlite-check")
for stage in Stage.values:
    lease = next_assignment(worker=annotator, stage=stage)
    if lease is not None and lease.unit.instance is not None:
        break
instance = lease.unit.instance
stored = [link.image_id for link in InstanceImage.objects.filter(instance=instance).order_by("position")]
assert [image.pk for image in instance.ordered_images()] == stored, stored
held = next_assignment(worker=annotator, stage=stage).unit.instance  # the lease it holds
assert [image.pk for image in held.ordered_images()] == stored, stored
print("leased", stage, "with", len(stored), "images")
"""


@pytest.mark.integration
def test_the_demo_loads_and_a_unit_leases_with_its_images_on_sqlite_as_make_run_uses_it(manage_on_sqlite):
    manage_on_sqlite("migrate")
    manage_on_sqlite("load_demo")
    leased = manage_on_sqlite("shell", "--command", _LEASE_A_DEMO_UNIT)
    assert "leased" in leased and "with 0 images" not in leased, leased


BEFORE_UNIT_ROUNDS = ("annotation", "0011_judgement_says_whose")
UNIT_ROUNDS = ("annotation", "0012_units_keyed_by_what_does_not_move")


def test_caption_units_the_old_keys_made_twice_are_closed_flagged_and_reported(latest_schema_afterwards,
                                                                               capsys):
    apps = migrate_to(BEFORE_UNIT_ROUNDS)
    model = partial(apps.get_model, "annotation")
    family = model("InstructionFamily").objects.create(name="Animals")
    workers = [model("Worker").objects.create(platform="prolific", external_id=f"P{n}") for n in range(3)]
    start = timezone.now() - timedelta(hours=5)

    def at(row, hours):
        type(row).objects.filter(pk=row.pk).update(created_at=start + timedelta(hours=hours))

    def unit(instance, key, hours, *authors):
        made = model("WorkUnit").objects.create(stage="caption", key=key, family=family, instance=instance, overlap=3)
        at(made, hours)
        for worker in authors:
            lease = model("Assignment").objects.create(unit=made, worker=worker, status="submitted",
                                                       lease_expires_at=start)
            caption = model("Caption").objects.create(instance=instance, texts=["A caption."], author=worker,
                                                      assignment=lease, round=instance.captions.count() + 1)
            at(caption, hours + 0.1)
        return made

    # The case: one caption in, the sweep's round 2 and round 3, one worker in two of them.
    partly = model("Instance").objects.create(family=family, instruction="Why?", status="awaiting_caption")
    first = unit(partly, f"instance-{partly.pk}-round-1", 0, workers[0])
    second = unit(partly, f"instance-{partly.pk}-round-2", 1, workers[0])
    third = unit(partly, f"instance-{partly.pk}-round-3", 2)
    # Surplus answers that complete their round between them.
    filled = model("Instance").objects.create(family=family, instruction="Where?", status="awaiting_caption")
    filled_first = unit(filled, f"instance-{filled.pk}-round-1", 0, workers[0])
    unit(filled, f"instance-{filled.pk}-round-2", 1, workers[1], workers[2])
    # A real second round: three captions, one given to the model and blamed, then its new unit.
    sent_back = model("Instance").objects.create(family=family, instruction="How many?", status="awaiting_caption")
    done = unit(sent_back, f"instance-{sent_back.pk}-round-1", 0, *workers)
    used = sent_back.captions.order_by("pk").last()
    model("Reference").objects.create(instance=sent_back, caption=used, text="Two.", verdict="incorrect",
                                      problem_in_caption=True, decided_at=start + timedelta(hours=2))
    again = unit(sent_back, f"instance-{sent_back.pk}-round-4", 3)

    apps = migrate_to(UNIT_ROUNDS)
    model = partial(apps.get_model, "annotation")
    units = {row.pk: row for row in model("WorkUnit").objects.all()}
    # The round's own unit asks only for what its surplus units did not bring.
    assert (units[first.pk].key, units[first.pk].surplus, units[first.pk].status, units[first.pk].overlap) == (
        f"instance-{partly.pk}-round-1", False, "open", 2)
    assert [(units[u.pk].surplus, units[u.pk].status) for u in (second, third)] == [(True, "cancelled")] * 2
    assert units[filled_first.pk].status == "done"
    filled = model("Instance").objects.get(pk=filled.pk)
    assert (filled.status, filled.current_caption.author_id) == ("awaiting_reference", workers[2].pk)
    assert (units[done.pk].key, units[again.pk].key) == (
        f"instance-{sent_back.pk}-round-1", f"instance-{sent_back.pk}-round-2")
    rounds = dict(model("Instance").objects.values_list("pk", "caption_round"))
    assert (rounds[partly.pk], rounds[sent_back.pk]) == (1, 2)
    assert set(model("Caption").objects.filter(instance_id=sent_back.pk).values_list("round", flat=True)) == {1}
    # Surplus answers are kept.
    assert model("Caption").objects.filter(instance_id=partly.pk).count() == 2
    printed = capsys.readouterr().out
    assert "3 surplus caption unit(s) on 2 instance(s), all closed: 1 held no answer, 2 held answers" in printed
    assert "3 surplus caption(s) from 3 worker(s)" in printed
    assert "1 caption(s) by a worker who had already captioned the same instance" in printed

    from annotation.crowdwork import surplus

    again_report = surplus.repair(apps)
    assert (again_report.newly_flagged, again_report.units_no_longer_owed, again_report.surplus_units) == (0, 0, 3)


VERIFIED_REFERENCES = ("annotation", "0015_verified_instances_hold_their_reference")


def test_verified_instances_without_a_reference_output_get_the_reference_verified_correct(
        latest_schema_afterwards):
    apps = migrate_to(("annotation", "0014_review_and_adjudication"))
    model = partial(apps.get_model, "annotation")
    family = model("InstructionFamily").objects.create(name="Animals")

    def instance(status, reference_output="", *references):
        made = model("Instance").objects.create(family=family, instruction="Why?", status=status,
                                                reference_output=reference_output)
        for text, verdict in references:
            model("Reference").objects.create(instance=made, text=text, verdict=verdict, source="imported")
        return made

    # An imported row rated correct without a reference_output of its own, as 0012 left it.
    imported = instance("verified", "", ("The first candidate.", "incorrect"), ("The candidate.", "correct"))
    blank = instance("verified", " \n", ("Spaces only before.", "correct"))
    human = instance("verified", "No", ("A longer candidate.", "correct"))
    wrong = instance("verified", "", ("A wrong candidate.", "incorrect"))
    waiting = instance("awaiting_verification", "", ("Not yet decided.", "pending"))

    apps = migrate_to(VERIFIED_REFERENCES)
    outputs = dict(apps.get_model("annotation", "Instance").objects.values_list("pk", "reference_output"))
    assert outputs[imported.pk] == "The candidate."
    assert outputs[blank.pk] == "Spaces only before."
    assert outputs[human.pk] == "No"
    assert outputs[wrong.pk] == outputs[waiting.pk] == ""


BEFORE_WORKFORCE_LABEL = (("annotation", "0036_worker_platform_toloka"), ("mturk", "0007_study_platform_toloka"))
WORKFORCE_LABEL = ("annotation", "0037_workforce_models_take_the_annotation_label")


def test_the_workforce_models_take_the_annotation_label_with_their_tables_rows_and_permissions(
        latest_schema_afterwards):
    apps = migrate_to(*BEFORE_WORKFORCE_LABEL)
    worker = apps.get_model("annotation", "Worker").objects.create(platform="mturk", external_id="W1")
    apps.get_model("mturk", "WorkerBlock").objects.create(worker=worker, reason="Copied captions")
    permission = apps.get_model("auth", "Permission").objects.get(
        content_type__app_label="mturk", codename="change_workerblock")
    group = apps.get_model("auth", "Group").objects.create(name="Blockers")
    group.permissions.add(permission)

    apps = migrate_to(WORKFORCE_LABEL)
    block = apps.get_model("annotation", "WorkerBlock").objects.get()
    assert (block.worker_id, block.reason) == (worker.pk, "Copied captions")
    assert "mturk_workerblock" in connection.introspection.table_names()
    kept = apps.get_model("auth", "Group").objects.get(name="Blockers").permissions.get()
    assert (kept.pk, kept.content_type.app_label, kept.codename) == (permission.pk, "annotation", "change_workerblock")


TABLE2_COUNTS = ("annotation", "0039_table2_counts_kept_by_the_database")


def test_table2_counts_start_with_every_decided_instance_marked_and_the_first_read_counts_them(
        latest_schema_afterwards):
    from annotation.collection.table2_counts import TABLE2
    from tests.kept_counts_support import assert_kept_counts_equal_a_count_from_scratch

    apps = migrate_to(WORKFORCE_LABEL)
    model = partial(apps.get_model, "annotation")
    family = model("InstructionFamily").objects.create(name="Animals")
    decided = []
    for status, verdict in (("verified", "correct"), ("discarded", "incorrect"), ("awaiting_verification", "pending")):
        instance = model("Instance").objects.create(family=family, instruction="Why?", status=status)
        model("Reference").objects.create(instance=instance, text="A candidate.", verdict=verdict, model="gpt-4")
        decided += [instance.pk] if verdict != "pending" else []

    apps = migrate_to(TABLE2_COUNTS)
    marks = apps.get_model("annotation", "Table2Count").objects.filter(stale=True)
    assert sorted(marks.values_list("instance_id", flat=True)) == decided
    assert_kept_counts_equal_a_count_from_scratch([TABLE2])


WORKFLOW_COUNTS = ("annotation", "0041_workflow_counts_kept_by_the_database")


def test_workflow_counts_start_with_every_instance_marked_and_the_first_read_counts_them(latest_schema_afterwards):
    from tests.kept_counts_support import (
        assert_kept_counts_equal_a_count_from_scratch,
        assert_workflow_figures_equal_a_count_made_directly,
    )

    apps = migrate_to(TABLE2_COUNTS)
    model = partial(apps.get_model, "annotation")
    family = model("InstructionFamily").objects.create(name="Animals")
    instances = [model("Instance").objects.create(family=family, instruction="Why?", status=status)
                 for status in ("verified", "verified", "discarded", "awaiting_caption")]
    for instance, name in ((instances[0], "llava"), (instances[0], "blip"), (instances[1], "llava"),
                           (instances[2], "llava")):
        model("ModelResponse").objects.create(instance=instance, model_name=name, text="An answer.")

    apps = migrate_to(WORKFLOW_COUNTS)
    marks = apps.get_model("annotation", "WorkflowCount").objects.filter(stale=True)
    assert sorted(marks.values_list("instance_id", flat=True)) == [instance.pk for instance in instances]
    assert_kept_counts_equal_a_count_from_scratch()
    assert_workflow_figures_equal_a_count_made_directly([family])


def test_verification_gold_answers_are_kept_as_the_verdicts_they_name(latest_schema_afterwards):
    apps = migrate_to(("annotation", "0045_accuracy_by_verdict"))
    qualification = apps.get_model("annotation", "StageQualification").objects
    items = apps.get_model("annotation", "GoldItem").objects

    def item(stage, answer):
        return items.create(qualification=qualification.get_or_create(
            stage=stage, defaults={"name": stage, "description": "A test."})[0], content={}, question="?",
            options=["Correct", "Incorrect"], answer=answer).pk

    spelled = {item("verification", " Correct"): "correct", item("verification", "INCORRECT"): "incorrect",
               item("verification", "correct"): "correct", item("caption", " Correct"): " Correct"}
    items = migrate_to(("annotation", "0046_verification_gold_answers_as_verdicts")).get_model(
        "annotation", "GoldItem").objects
    assert dict(items.values_list("pk", "answer")) == spelled
