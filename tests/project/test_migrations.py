"""Data migrations, run for real on rows written in the schema before them."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

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


def test_existing_pairwise_units_are_pointed_at_the_battle_their_key_names(latest_schema_afterwards):
    apps = migrate_to(BEFORE_WORK_UNIT_BATTLE)
    family = apps.get_model("annotation", "InstructionFamily").objects.create(name="Animals")
    instance = apps.get_model("annotation", "Instance").objects.create(family=family, instruction="Why?")
    response = apps.get_model("annotation", "ModelResponse").objects
    a = response.create(instance=instance, model_name="model-a", text="A")
    b = response.create(instance=instance, model_name="model-b", text="B")
    study = apps.get_model("annotation", "PreferenceStudy").objects.create(name="Study")
    battle = apps.get_model("annotation", "Battle").objects.create(
        study=study, instance=instance, response_a=a, response_b=b)
    units = apps.get_model("annotation", "WorkUnit").objects
    pairwise = units.create(stage="pairwise", key=f"battle-{battle.pk}", family=family, instance=instance)
    # Deleting a study left its units behind while nothing tied a unit to its battle.
    orphan = units.create(stage="pairwise", key=f"battle-{battle.pk + 1}", family=family)
    caption = units.create(stage="caption", key=f"caption-{instance.pk}-1", family=family, instance=instance)

    units = migrate_to(WORK_UNIT_BATTLE).get_model("annotation", "WorkUnit").objects
    battle_of = dict(units.values_list("pk", "battle_id"))
    assert battle_of == {pairwise.pk: battle.pk, orphan.pk: None, caption.pk: None}
