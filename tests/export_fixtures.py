"""A judged tournament for the export, snapshot and API tests."""

import pytest

from annotation.crowdwork.queue import next_assignment
from annotation.judging.runner import create_judge_run, run_judge
from annotation.models import CHIRP_CRITERIA, JudgeRun, Stage
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from tests.factories import FamilyFactory, WorkerFactory
from tests.openai_fake import completion
from tests.scoring_factories import create_tournament, verified_instance, with_responses

CRITERIA = {**{name: "left" for name in CHIRP_CRITERIA[1:]}, "detail": "right"}
RAW_WORKER_IDS = ("A1RAWWORKERID", "A2RAWWORKERID")


@pytest.fixture(name="judged_tournament_with_criteria")
def judged_tournament_with_criteria_fixture(judge_server):
    """Two single-image instances and a multi-image one, two workers per battle, one judge."""
    art = FamilyFactory(name="Art knowledge", source="reformatted", source_dataset="WikiArt",
                        citation="@article{wikiart, title={WikiArt}}")
    multi = FamilyFactory(name="Image comparison", is_multi_image=True)
    for family in (art, multi):
        instance = verified_instance(family=family)
        instance.references.create(caption=instance.current_caption, model="gpt-4",
                                   text="A candidate reference.", verdict="correct")
        with_responses(instance, "llava", "otter")
    tournament = create_tournament(name="Table 3", judgements_per_pair=2, with_criteria=True)
    launch_tournament(tournament=tournament)
    workers = [WorkerFactory(external_id=external_id) for external_id in RAW_WORKER_IDS]
    for worker in workers:
        while (assignment := next_assignment(worker=worker, stage=Stage.PAIRWISE)) is not None:
            submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice="left",
                                      criteria=CRITERIA, active_seconds=12.5)
    judge_server.default = completion("Thinking.\nOverall, Response A is better.")
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    run_judge(run=run)
    return tournament, run
