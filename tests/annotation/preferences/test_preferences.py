import csv
import io
import json

import pytest

from annotation.crowdwork.queue import next_assignment
from annotation.exceptions import AnnotationError
from annotation.models import (
    REFERENCE_MODEL_NAME,
    Battle,
    HumanJudgement,
    ModelResponse,
    Stage,
    Tournament,
    WorkUnit,
)
from annotation.preferences.judgements import pairwise_task, submit_pairwise_judgement
from annotation.preferences.predictions import import_predictions
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring.battles import human_battles
from tests.factories import FamilyFactory, WorkerFactory
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db

CRITERIA = {
    "relevance_and_completeness": "left",
    "understanding_and_reasoning": "right",
    "hallucination": "left",
    "detail": "left",
}


def predictions_csv(rows, *, image_column="image", models=("LLaVA (13B)", "mPLUG-Owl (7B)")):
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            "instruction",
            "instruction_category",
            image_column,
            *(f"{model} prediction" for model in models),
        ]
    )
    writer.writerows(rows)
    data = io.BytesIO(out.getvalue().encode("utf-8"))
    data.name = "predictions.csv"
    return data


def url_of(instance):
    return instance.ordered_images()[0].url


def row_for(instance, *predictions):
    return [instance.instruction, instance.family.name, url_of(instance), *predictions]


# --- predictions.csv ---------------------------------------------------------------------------


def test_import_predictions_matches_rows_by_instruction_and_image():
    first, second = verified_instance(), verified_instance()
    result = import_predictions(
        path_or_file=predictions_csv(
            [
                row_for(first, "A red bike.", "A bicycle."),
                row_for(second, "Blue door.", "A door."),
            ]
        )
    )
    assert result.created == 4
    assert result.models == ("LLaVA (13B)", "mPLUG-Owl (7B)")
    assert ModelResponse.objects.get(instance=second, model_name="LLaVA (13B)").text == "Blue door."


def test_import_predictions_of_multi_image_rows_reads_the_url_list():
    instance = verified_instance(family=FamilyFactory(is_multi_image=True))
    urls = [image.url for image in instance.ordered_images()]
    import_predictions(
        path_or_file=predictions_csv(
            [
                [
                    instance.instruction,
                    instance.family.name,
                    json.dumps(urls),
                    "Left is older.",
                    "Same.",
                ]
            ],
            image_column="images",
        )
    )
    assert instance.model_responses.count() == 2


def test_importing_the_same_predictions_twice_changes_nothing():
    instance = verified_instance()
    sheet = [row_for(instance, "A red bike.", "A bicycle.")]
    import_predictions(path_or_file=predictions_csv(sheet))
    again = import_predictions(path_or_file=predictions_csv(sheet))
    assert (again.created, again.unchanged) == (0, 2)
    assert ModelResponse.objects.count() == 2


def test_unmatched_row_is_reported_by_row_and_nothing_is_imported():
    instance = verified_instance()
    with pytest.raises(AnnotationError) as error:
        import_predictions(
            path_or_file=predictions_csv(
                [
                    row_for(instance, "A red bike.", "A bicycle."),
                    [
                        instance.instruction,
                        instance.family.name,
                        "https://elsewhere.example/x.jpg",
                        "a",
                        "b",
                    ],
                ]
            )
        )
    assert "row 3: no instance has the instruction" in str(error.value)
    assert "https://elsewhere.example/x.jpg" in str(error.value)
    assert "“instance_id” column" in str(error.value)
    assert "nothing was imported" in str(error.value)
    assert not ModelResponse.objects.exists()


def test_differing_second_prediction_for_an_instance_names_both_rows():
    instance = verified_instance()
    with pytest.raises(AnnotationError) as error:
        import_predictions(
            path_or_file=predictions_csv(
                [
                    row_for(instance, "A red bike.", "A bicycle."),
                    row_for(instance, "Again.", "Again."),
                ]
            )
        )
    message = str(error.value)
    assert 'row 3, column "LLaVA (13B) prediction": a second LLaVA (13B) prediction' in message
    assert "different from row 2's" in message
    assert not ModelResponse.objects.exists()


def test_empty_prediction_is_reported_by_row_and_column():
    instance = verified_instance()
    with pytest.raises(AnnotationError) as error:
        import_predictions(path_or_file=predictions_csv([row_for(instance, "A red bike.", " ")]))
    assert 'row 2, column "mPLUG-Owl (7B) prediction": is empty' in str(error.value)
    assert not ModelResponse.objects.exists()


# --- sampling ----------------------------------------------------------------------------------


def two_instances_with_two_models():
    instances = [verified_instance(), verified_instance()]
    for instance in instances:
        with_responses(instance, "llava", "otter")
    return instances


def pairs(tournament):
    return sorted(
        (b.instance_id, b.response_a.model_name, b.response_b.model_name)
        for b in tournament.battles.select_related("response_a", "response_b")
    )


def test_all_pairs_pits_every_model_and_the_reference_on_every_instance():
    two_instances_with_two_models()
    tournament = create_tournament(name="all", sampling=Tournament.Sampling.ALL_PAIRS)
    assert tournament.battles.count() == 6  # 3 "models" (llava, otter, reference) → 3 pairs × 2
    assert ModelResponse.objects.filter(model_name=REFERENCE_MODEL_NAME).count() == 2


def test_k_matchups_draws_k_pairs_per_question_the_same_for_the_same_seed():
    two_instances_with_two_models()
    first = create_tournament(
        name="k1", sampling=Tournament.Sampling.K_MATCHUPS, matchups_per_question=2, seed=7
    )
    second = create_tournament(
        name="k2", sampling=Tournament.Sampling.K_MATCHUPS, matchups_per_question=2, seed=7
    )
    assert first.battles.count() == 4
    assert pairs(first) == pairs(second)
    per_instance = {}
    for battle in first.battles.all():
        per_instance[battle.instance_id] = per_instance.get(battle.instance_id, 0) + 1
    assert sorted(per_instance.values()) == [2, 2]


def test_uniform_sampling_draws_the_asked_number_of_battles():
    two_instances_with_two_models()
    tournament = create_tournament(
        name="uniform", sampling=Tournament.Sampling.UNIFORM, battle_count=4, seed=3
    )
    assert tournament.battles.count() == 4
    again = create_tournament(
        name="uniform-again", sampling=Tournament.Sampling.UNIFORM, battle_count=4, seed=3
    )
    assert pairs(again) == pairs(tournament)


def test_sampling_can_leave_the_reference_out_and_choose_models():
    instance = verified_instance()
    with_responses(instance, "llava", "otter", "idefics")
    tournament = create_tournament(name="chosen", include_reference=False, model_names=["llava", "otter"])
    (battle,) = tournament.battles.all()
    assert {battle.response_a.model_name, battle.response_b.model_name} == {"llava", "otter"}


def test_a_tournament_with_nothing_to_compare_says_so():
    verified_instance()
    with pytest.raises(AnnotationError, match="nothing to compare"):
        create_tournament(name="empty")
    assert not Tournament.objects.exists()


# --- the crowd ---------------------------------------------------------------------------------


def launched_tournament(**options):
    instance = verified_instance()
    with_responses(instance, "llava")
    tournament = create_tournament(name=options.pop("name", "crowd"), **options)
    return launch_tournament(tournament=tournament)


def test_launch_puts_each_battle_in_the_queue_with_its_overlap():
    tournament = launched_tournament(judgements_per_pair=5)
    (battle,) = tournament.battles.all()
    unit = WorkUnit.objects.get(stage=Stage.PAIRWISE)
    assert (unit.battle, unit.key, unit.overlap, unit.instance_id) == (
        battle,
        f"battle-{battle.pk}",
        5,
        battle.instance_id,
    )
    launch_tournament(tournament=tournament)
    assert WorkUnit.objects.filter(stage=Stage.PAIRWISE).count() == 1


def test_submission_records_the_shown_side_and_is_idempotent(worker):
    launched_tournament()
    assignment = next_assignment(worker=worker, stage=Stage.PAIRWISE)
    task = pairwise_task(assignment=assignment)
    judgement = submit_pairwise_judgement(
        assignment_id=assignment.pk, worker=worker, choice="left", active_seconds=12.5
    )
    again = submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice="right")
    assert again.pk == judgement.pk
    assert HumanJudgement.objects.count() == 1
    assert judgement.shown_left == task["shown_left"]
    assert judgement.choice == "left"
    on_left = "model_a" if task["shown_left"] == "a" else "model_b"
    assert judgement.winner_side("left") == on_left
    assignment.refresh_from_db()
    assert assignment.status == "submitted"


def test_sides_are_drawn_per_assignment():
    launched_tournament(judgements_per_pair=20)
    sides = set()
    for _ in range(20):
        worker = WorkerFactory()
        assignment = next_assignment(worker=worker, stage=Stage.PAIRWISE)
        sides.add(pairwise_task(assignment=assignment)["shown_left"])
        # The same assignment always shows the same sides, so a reload does not swap them.
        assert pairwise_task(assignment=assignment)["shown_left"] in sides
    assert sides == {"a", "b"}


def test_chirp_criteria_are_required_and_stored_when_the_tournament_asks(worker):
    launched_tournament(with_criteria=True)
    assignment = next_assignment(worker=worker, stage=Stage.PAIRWISE)
    with pytest.raises(AnnotationError, match="detail"):
        submit_pairwise_judgement(
            assignment_id=assignment.pk,
            worker=worker,
            choice="left",
            criteria={k: v for k, v in CRITERIA.items() if k != "detail"},
        )
    judgement = submit_pairwise_judgement(
        assignment_id=assignment.pk, worker=worker, choice="left", criteria=CRITERIA
    )
    assert judgement.criteria == CRITERIA


def test_rubric_scores_must_be_one_to_five(worker):
    launched_tournament(
        with_rubric=True, rubric="Is the answer correct? Score 1: wrong ... Score 5: right"
    )
    assignment = next_assignment(worker=worker, stage=Stage.PAIRWISE)
    assert pairwise_task(assignment=assignment)["rubric"].startswith("Is the answer correct?")
    with pytest.raises(AnnotationError, match="from 1 to 5"):
        submit_pairwise_judgement(
            assignment_id=assignment.pk,
            worker=worker,
            choice="left",
            rubric_scores={"left": 6, "right": 2},
        )
    judgement = submit_pairwise_judgement(
        assignment_id=assignment.pk,
        worker=worker,
        choice="left",
        rubric_scores={"left": "4", "right": 2},
    )
    assert judgement.rubric_scores == {"left": 4, "right": 2}


def test_criteria_are_refused_when_the_tournament_does_not_ask(worker):
    launched_tournament()
    assignment = next_assignment(worker=worker, stage=Stage.PAIRWISE)
    with pytest.raises(AnnotationError, match="only for an overall"):
        submit_pairwise_judgement(
            assignment_id=assignment.pk, worker=worker, choice="left", criteria=CRITERIA
        )


# --- selectors ---------------------------------------------------------------------------------


def test_human_battles_map_the_shown_side_back_to_model_a_and_b():
    tournament = launched_tournament(with_criteria=True)
    (battle,) = Battle.objects.select_related("response_a", "response_b").filter(tournament=tournament)
    wanted = None
    for _ in range(3):
        worker = WorkerFactory()
        assignment = next_assignment(worker=worker, stage=Stage.PAIRWISE)
        shown_left = pairwise_task(assignment=assignment)["shown_left"]
        # Every worker prefers llava, wherever it was shown.
        llava_is_a = battle.response_a.model_name == "llava"
        llava_on_left = (shown_left == "a") == llava_is_a
        side = "left" if llava_on_left else "right"
        submit_pairwise_judgement(
            assignment_id=assignment.pk,
            worker=worker,
            choice=side,
            criteria={**CRITERIA, "detail": side},
        )
        wanted = "model_a" if llava_is_a else "model_b"
    frame = human_battles(tournament=tournament)
    assert list(frame["winner"]) == [wanted] * 3
    assert set(frame["model_a"]) == {battle.response_a.model_name}
    assert list(frame.columns[:3]) == ["model_a", "model_b", "winner"]
    assert set(frame["judge"]) == {"human"} and set(frame["criterion"]) == {"overall"}
    assert set(frame["instruction_category"]) == {battle.instance.family.name}
    assert set(frame["question_id"]) == {battle.instance_id}
    assert not frame["is_multi_image"].any()
    detail = human_battles(tournament=tournament, criterion="detail")
    assert list(detail["winner"]) == [wanted] * 3
