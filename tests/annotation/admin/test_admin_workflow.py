"""The researcher's workflow in the admin: each family's and tournament's steps, the next action as one
button, the family form (seed image upload, skill tags), rubric tournaments, and the front door."""

import io
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from PIL import Image

from annotation.admin.worker_check import NO_WORKER_MESSAGE
from annotation.judging.runner import create_judge_run
from annotation.models import (
    Assignment,
    Battle,
    HumanJudgement,
    Instance,
    InstructionFamily,
    JudgeRun,
    SeedImage,
    Snapshot,
    Stage,
    StageConfig,
    Tournament,
)
from annotation.preferences.tournaments import reference_responses
from tasks.models import Job as JobRecord
from tests.factories import (
    CaptionFactory,
    FamilyFactory,
    ImageAssetFactory,
    InstanceFactory,
    WorkerFactory,
    launch,
)
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher(admin_client):
    return admin_client


def png(width=64, height=48, colour=(200, 30, 30)):
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def family_form(**fields):
    """The add form of a family as the admin posts it, with empty inlines."""
    data = {
        "name": "Contextual knowledge of events", "description": "Why something happens.",
        "skill_tags": "", "target_instances": "10", "source": "new", "source_dataset": "",
        "citation": "", "seed_instruction": "Why is he waving? What happened in this event?",
        "seed_response": "He is greeting the crowd.",
        "seedimage_set-TOTAL_FORMS": "0", "seedimage_set-INITIAL_FORMS": "0",
        "seedimage_set-MIN_NUM_FORMS": "0", "seedimage_set-MAX_NUM_FORMS": "1000",
        "stage_configs-TOTAL_FORMS": "0", "stage_configs-INITIAL_FORMS": "0",
        "stage_configs-MIN_NUM_FORMS": "0", "stage_configs-MAX_NUM_FORMS": "1000",
    }
    data.update(fields)
    return data


def workflow_url(obj):
    name = "instructionfamily" if isinstance(obj, InstructionFamily) else "tournament"
    return reverse(f"admin:annotation_{name}_workflow", args=[obj.pk])


def next_url(obj):
    name = "instructionfamily" if isinstance(obj, InstructionFamily) else "tournament"
    return reverse(f"admin:annotation_{name}_workflow_next", args=[obj.pk])


def next_button(page):
    """(action key, button text) of the page's one next-action button."""
    found = re.search(r'name="action" value="([^"]+)">\s*<button type="submit"[^>]*>([^<]+)</button>', page)
    return found.groups() if found else None


# --- the family form ---------------------------------------------------------------------------


def test_family_is_created_with_its_seed_image_uploaded_on_the_family_form(researcher, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    data = family_form(**{
        "seedimage_set-TOTAL_FORMS": "1",
        "seedimage_set-0-upload": SimpleUploadedFile("waving man.png", png(), "image/png"),
        "seedimage_set-0-licence": "CC0", "seedimage_set-0-author": "A. Photographer",
    })
    response = researcher.post(reverse("admin:annotation_instructionfamily_add"), data)
    family = InstructionFamily.objects.get()
    assert response.status_code == 302 and response.url == workflow_url(family)
    seed = SeedImage.objects.get(family=family)
    assert (seed.position, seed.image.licence, seed.image.width) == (0, "CC0", 64)
    assert str(seed.image) == "waving man.png (64×48)"
    change_page = researcher.get(reverse("admin:annotation_instructionfamily_change", args=[family.pk]))
    assert 'class="admin-thumbnail"' in change_page.content.decode()
    assert "waving man.png" in change_page.content.decode()


def test_a_second_seed_image_goes_after_the_first(researcher, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    researcher.post(reverse("admin:annotation_instructionfamily_add"), family_form(**{
        "is_multi_image": "on", "seedimage_set-TOTAL_FORMS": "2",
        "seedimage_set-0-upload": SimpleUploadedFile("first.png", png(colour=(1, 2, 3)), "image/png"),
        "seedimage_set-1-upload": SimpleUploadedFile("second.png", png(colour=(9, 8, 7)), "image/png"),
    }))
    names = [str(seed.image) for seed in SeedImage.objects.order_by("position")]
    assert names == ["first.png (64×48)", "second.png (64×48)"]


def test_a_refused_seed_upload_is_a_form_error_and_no_family_is_saved(researcher, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    response = researcher.post(reverse("admin:annotation_instructionfamily_add"), family_form(**{
        "seedimage_set-TOTAL_FORMS": "1",
        "seedimage_set-0-upload": SimpleUploadedFile("notes.png", b"just some text", "image/png"),
    }))
    assert response.status_code == 200
    assert "not a JPEG, PNG, WebP or GIF image" in response.content.decode()
    assert not InstructionFamily.objects.exists()


def test_a_stored_seed_images_licence_is_shown_beside_it_on_the_family_form(researcher):
    family = FamilyFactory()
    SeedImage.objects.create(family=family, image=ImageAssetFactory(licence="CC BY 2.0", author="J. Doe"))
    page = researcher.get(reverse("admin:annotation_instructionfamily_change", args=[family.pk])).content.decode()
    assert re.search(r'name="seedimage_set-0-licence"[^>]*value="CC BY 2.0"|value="CC BY 2.0"[^>]*'
                     r'name="seedimage_set-0-licence"', page)
    assert re.search(r'value="J. Doe"[^>]*name="seedimage_set-0-author"|name="seedimage_set-0-author"[^>]*'
                     r'value="J. Doe"', page)


def test_skill_tags_are_typed_comma_separated_and_stored_as_a_list(researcher):
    researcher.post(reverse("admin:annotation_instructionfamily_add"),
                    family_form(skill_tags=" recognition, reasoning ,, Recognition,  world  knowledge "))
    family = InstructionFamily.objects.get()
    assert family.skill_tags == ["recognition", "reasoning", "world knowledge"]
    page = researcher.get(reverse("admin:annotation_instructionfamily_change", args=[family.pk])).content.decode()
    assert 'value="recognition, reasoning, world knowledge"' in page


def test_skill_tags_typed_as_a_json_list_mean_the_same_tags(researcher):
    researcher.post(reverse("admin:annotation_instructionfamily_add"),
                    family_form(skill_tags='["recognition", "reasoning"]'))
    assert InstructionFamily.objects.get().skill_tags == ["recognition", "reasoning"]


def test_a_skill_tag_with_a_control_character_is_refused(researcher):
    response = researcher.post(reverse("admin:annotation_instructionfamily_add"),
                               family_form(skill_tags="recognition, rea\x07soning"))
    assert response.status_code == 200
    assert "control characters" in response.content.decode()
    assert not InstructionFamily.objects.exists()


def test_family_actions_offer_no_pairwise_launch(researcher):
    FamilyFactory()
    page = researcher.get(reverse("admin:annotation_instructionfamily_changelist")).content.decode()
    assert "launch_instruction_generation" in page
    assert "launch_pairwise" not in page


# --- the family's workflow ---------------------------------------------------------------------


def test_a_new_familys_workflow_lists_every_step_in_order_and_offers_the_launch(researcher):
    family = FamilyFactory(target_instances=3)
    page = researcher.get(workflow_url(family)).content.decode()
    labels = re.findall(r'<li class="workflow-step[^"]*"[^>]*>.*?<strong>([^<]+)</strong>', page, re.S)
    assert labels == ["Instruction generation", "Instruction-conditioned captions", "Candidate references",
                      "Verification", "Model predictions", "Battles sampled", "Tournament launched",
                      "Human judgements", "LLM judge", "Leaderboard", "Snapshot"]
    assert "0 of 3 instances written; not launched" in page
    assert next_button(page) == ("launch_instruction_generation", "Launch instruction generation")


def test_the_next_action_button_launches_the_stage_then_offers_the_next(researcher,
                                                                          django_capture_on_commit_callbacks):
    family = FamilyFactory()
    with django_capture_on_commit_callbacks() as callbacks:
        response = researcher.post(next_url(family), {"action": "launch_instruction_generation"}, follow=True)
    page = response.content.decode()
    assert "Instruction generation launched" in page
    assert StageConfig.objects.get(family=family, stage=Stage.INSTRUCTION_GENERATION).launched_at
    assert len(callbacks) == 1  # the job that creates the work units
    assert next_button(page) == ("launch_caption", "Launch captions")


def test_a_stale_next_action_does_nothing_and_says_what_is_next_now(researcher):
    family = FamilyFactory()
    launch(family, Stage.INSTRUCTION_GENERATION)
    response = researcher.post(next_url(family), {"action": "launch_instruction_generation"}, follow=True)
    assert "Nothing was done" in response.content.decode() and "Launch captions" in response.content.decode()
    assert not StageConfig.objects.filter(stage=Stage.CAPTION).exists()


def test_a_family_waiting_for_a_reference_without_a_model_links_to_the_paste_page(researcher, settings):
    settings.OPENAI_REFERENCE_MODEL = ""
    family = FamilyFactory()
    for stage in (Stage.INSTRUCTION_GENERATION, Stage.CAPTION, Stage.VERIFICATION):
        launch(family, stage)
    instance = InstanceFactory(family=family, status=Instance.Status.AWAITING_REFERENCE)
    page = researcher.get(workflow_url(family)).content.decode()
    paste = reverse("admin:annotation_instance_add_reference", args=[instance.pk])
    assert f'href="{paste}">Paste a reference for instance #{instance.pk}</a>' in page


def test_a_family_with_verified_instances_and_predictions_leads_to_a_new_tournament(researcher):
    family = FamilyFactory(target_instances=1)
    for stage in (Stage.INSTRUCTION_GENERATION, Stage.CAPTION, Stage.VERIFICATION):
        launch(family, stage)
    with_responses(verified_instance(family=family), "llava", "otter")
    page = researcher.get(workflow_url(family)).content.decode()
    assert "2 responses from 2 models on 1 verified instance" in page
    assert ">Create a tournament</a>" in page
    add_form = researcher.get(reverse("admin:annotation_tournament_add"),
                              {"families": family.pk, "name": f"{family.name}: pairwise preference"})
    assert f'value="{family.name}: pairwise preference"' in add_form.content.decode()


def test_the_family_workflow_counts_its_benchmark_instances_the_latest_snapshot_holds(researcher):
    from annotation.models import Snapshot
    from annotation.models.benchmark import benchmark_instances

    family = FamilyFactory(target_instances=3)
    instances = [verified_instance(family=family) for _ in range(3)]
    in_benchmark = set(benchmark_instances().filter(family=family).values_list("pk", flat=True))
    assert in_benchmark == {instance.pk for instance in instances}
    other = verified_instance(family=FamilyFactory())
    # Counted in the database, not by fetching each snapshot's digest of every instance.
    Snapshot.objects.create(version=1, status=Snapshot.Status.DONE,
                            instance_digests={str(pk): "0" * 64 for pk in (instances[0].pk, other.pk)})
    Snapshot.objects.create(version=2, status=Snapshot.Status.DONE,
                            instance_digests={str(pk): "0" * 64 for pk in (instances[0].pk, instances[1].pk, other.pk)})
    with CaptureQueriesContext(connection) as queries:
        page = researcher.get(workflow_url(family)).content.decode()
    assert "v2: done, holds 2 of the 3 instance(s) in the benchmark now" in page
    assert not [query for query in queries if '"instance_digests" FROM' in query["sql"]]


def test_a_built_snapshots_count_is_remembered_and_follows_the_benchmark_as_it_changes(researcher, fresh_cache):
    from annotation.models import Snapshot

    family = FamilyFactory(target_instances=3)
    instances = [verified_instance(family=family) for _ in range(2)]
    Snapshot.objects.create(version=1, status=Snapshot.Status.DONE,
                            instance_digests={str(instance.pk): "0" * 64 for instance in instances})
    building = Snapshot.objects.create(version=2, status=Snapshot.Status.RUNNING,
                                       instance_digests={str(instances[0].pk): "0" * 64})

    def counted_from_digests(page_sql):
        return [query for query in page_sql if "jsonb_object_keys" in query["sql"]]

    def view():
        with CaptureQueriesContext(connection) as queries:
            page = researcher.get(workflow_url(family)).content.decode()
        return page, counted_from_digests(queries)

    # A snapshot still being built is counted on every view: its digests are not final.
    page, counted = view()
    assert "v2: running, holds 1 of the 2 instance(s) in the benchmark now" in page and counted
    assert view()[1]
    building.delete()
    page, counted = view()
    assert "v1: done, holds 2 of the 2 instance(s) in the benchmark now" in page and counted
    page, counted = view()
    assert "v1: done, holds 2 of the 2 instance(s) in the benchmark now" in page and not counted
    # A third instance in the benchmark is not in the built snapshot: counted again, for the new list.
    verified_instance(family=family)
    page, counted = view()
    assert "v1: done, holds 2 of the 3 instance(s) in the benchmark now" in page and counted


def test_a_failed_reference_job_shows_its_reason_on_the_family_workflow(researcher, settings):
    settings.OPENAI_REFERENCE_MODEL = "gpt-4"
    family = FamilyFactory()
    instance = InstanceFactory(family=family, status=Instance.Status.AWAITING_REFERENCE)
    JobRecord.objects.create(key=f"tasks.generate_reference:{instance.pk}", task="tasks.generate_reference",
                             args=[instance.pk], status=JobRecord.Status.FAILED, attempts=6,
                             error="AuthenticationError: Incorrect API key provided.")
    JobRecord.objects.create(key=f"tasks.create_work_units:{family.pk}:caption", task="tasks.create_work_units",
                             args=[family.pk, "caption"], status=JobRecord.Status.QUEUED)
    status = researcher.get(reverse("admin:annotation_instructionfamily_workflow_status", args=[family.pk])).json()
    jobs = {job["label"]: job for job in status["jobs"]}
    failed = jobs[f"Reference for instance #{instance.pk}: failed after 6 attempts"]
    assert failed["status"] == "failed" and failed["error"] == "AuthenticationError: Incorrect API key provided."
    assert "Creating the work units of Instruction-conditioned caption" in jobs
    page = researcher.get(workflow_url(family)).content.decode()
    assert "Incorrect API key provided." in page


def test_workflow_status_json_reports_a_running_judge_run(researcher, judge_server):
    instance = verified_instance()
    with_responses(instance, "llava", "otter")
    tournament = create_tournament(name="progress tournament")
    run = create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.RUNNING, total_calls=12, done_calls=3)
    status = researcher.get(reverse("admin:annotation_tournament_workflow_status", args=[tournament.pk])).json()
    job = next(job for job in status["jobs"] if job["key"] == f"judge-run-{run.pk}")
    assert (job["status"], job["done"], job["total"], job["percent"], job["running"]) == ("running", 3, 12, 25, True)
    page = researcher.get(workflow_url(tournament)).content.decode()
    assert '<progress max="100" value="25"' in page
    assert "annotation/workflow.js" in page and "<script>" not in page.split("</head>")[1]


def test_the_workflow_says_jobs_will_wait_when_no_worker_answers(researcher):
    # No Celery worker listens on this test's broker.
    family = FamilyFactory()
    page = researcher.get(workflow_url(family)).content.decode()
    assert NO_WORKER_MESSAGE.split(",")[0] in page
    index = researcher.get(reverse("admin:index")).content.decode()
    assert "No Celery worker is answering" in index


# --- tournaments ------------------------------------------------------------------------


def tournament_form(**fields):
    data = {"name": "Pairwise on family", "image_kind": "all", "model_names": "[]", "include_reference": "on",
            "sampling": "all_pairs", "battle_count": "0", "battles_per_round": "50", "matchups_per_question": "5",
            "judgements_per_pair": "5", "posterior_threshold": "0.95", "rubric": "", "lease_minutes": "30", "seed": "0",
            "aggregation": "judgements",
            "rubrics-TOTAL_FORMS": "0", "rubrics-INITIAL_FORMS": "0", "rubrics-MIN_NUM_FORMS": "0",
            "rubrics-MAX_NUM_FORMS": "1000",
            "endpoint_models-TOTAL_FORMS": "0", "endpoint_models-INITIAL_FORMS": "0",
            "endpoint_models-MIN_NUM_FORMS": "0", "endpoint_models-MAX_NUM_FORMS": "1000"}
    data.update(fields)
    return data


def test_a_rubric_tournament_without_a_rubric_cannot_be_saved(researcher):
    response = researcher.post(reverse("admin:annotation_tournament_add"), tournament_form(with_rubric="on"))
    assert response.status_code == 200
    assert "A tournament that asks for rubric scores needs a rubric" in response.content.decode()
    assert not Tournament.objects.exists()


def test_a_rubric_tournament_with_its_rubric_is_saved(researcher):
    researcher.post(reverse("admin:annotation_tournament_add"),
                    tournament_form(with_rubric="on", rubric="Grounded in the image? 1: no ... 5: fully."))
    assert Tournament.objects.get().with_rubric


def test_saving_a_tournament_samples_its_battles_and_opens_its_workflow(researcher):
    family = FamilyFactory()
    with_responses(verified_instance(family=family), "llava", "otter")
    response = researcher.post(reverse("admin:annotation_tournament_add"),
                               tournament_form(families=[family.pk]), follow=True)
    tournament = Tournament.objects.get()
    assert tournament.battles.count() == 3  # llava, otter and the verified reference, pairwise
    page = response.content.decode()
    assert "3 battles sampled" in page
    assert next_button(page) == ("launch_tournament", "Launch the tournament (3 battles)")


def test_saving_a_tournament_with_nothing_to_compare_says_so_and_keeps_the_tournament(researcher):
    response = researcher.post(reverse("admin:annotation_tournament_add"), tournament_form(), follow=True)
    assert Tournament.objects.exists() and not Battle.objects.exists()
    page = response.content.decode()
    assert "No battles were sampled yet" in page and "Import predictions first" in page


def test_verified_references_alone_are_no_model_predictions_on_either_workflow(researcher):
    # Drawing battles stores each verified reference as a response; before any prediction is
    # imported, that used to read as "Model predictions: done".
    instance = verified_instance()
    tournament = Tournament.objects.create(name="references only")
    reference_responses(instances=[instance])
    for page in (researcher.get(workflow_url(tournament)).content.decode(),
                 researcher.get(workflow_url(instance.family)).content.decode()):
        predictions = re.search(r"Model predictions.*?</li>", page, re.S).group(0)
        assert "0 responses from 0 models" in predictions and "DONE" not in predictions.upper()
    page = researcher.get(workflow_url(tournament)).content.decode()
    import_page = reverse("admin:annotation_modelresponse_import")
    assert f'class="button default workflow-button" href="{import_page}">Import predictions</a>' in page
    assert next_button(page) is None  # not "Sample battles", which could only say there is nothing


def test_the_tournaments_button_walks_launch_judge_and_snapshot(researcher, judge_server,
                                                                django_capture_on_commit_callbacks):
    with_responses(verified_instance(), "llava")
    tournament = create_tournament(name="walked tournament", judgements_per_pair=1)
    assert next_button(researcher.get(workflow_url(tournament)).content.decode())[0] == "launch_tournament"
    researcher.post(next_url(tournament), {"action": "launch_tournament"})
    tournament.refresh_from_db()
    assert tournament.launched_at
    page = researcher.get(workflow_url(tournament)).content.decode()
    assert next_button(page) == ("run_judge", "Run the LLM judge")
    with django_capture_on_commit_callbacks() as callbacks:
        researcher.post(next_url(tournament), {"action": "run_judge"})
    assert len(callbacks) == 1
    run = JudgeRun.objects.get(tournament=tournament)
    assert run.mode == JudgeRun.Mode.REFERENCE_FREE
    page = researcher.get(workflow_url(tournament)).content.decode()
    assert "Waiting for human judgements (0 of 1) and the LLM judge" in page
    # The judgements arrive (the crowd's and the judge's); then the snapshot is next.
    battle = tournament.battles.get()
    unit = battle.work_units.get()
    assignment = Assignment.objects.create(unit=unit, worker=WorkerFactory(), status=Assignment.Status.SUBMITTED,
                                           lease_expires_at=timezone.now(), submitted_at=timezone.now())
    HumanJudgement.objects.create(battle=battle, worker=assignment.worker, assignment=assignment,
                                  shown_left="A", choice="A")
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.DONE)
    page = researcher.get(workflow_url(tournament)).content.decode()
    assert next_button(page) == ("build_snapshot", "Build a snapshot")
    researcher.post(next_url(tournament), {"action": "build_snapshot"})
    snapshot = Snapshot.objects.get()
    assert list(snapshot.tournaments.all()) == [tournament]


def test_the_tournament_workflow_page_counts_its_battles_judgements_runs_and_snapshots_once(
        researcher, judge_server):
    with_responses(verified_instance(), "llava")
    tournament = create_tournament(name="counted tournament", judgements_per_pair=1)
    researcher.post(next_url(tournament), {"action": "launch_tournament"})
    create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    with CaptureQueriesContext(connection) as queries:
        page = researcher.get(workflow_url(tournament))
    assert page.status_code == 200
    read = [query["sql"] for query in queries.captured_queries]

    def counting(table):
        return [sql for sql in read if sql.startswith(f'SELECT COUNT(*) AS "__count" FROM "{table}" ')]

    def listing(table):
        return [sql for sql in read if re.match(rf'SELECT "{table}"\."id", .* FROM "{table}" ', sql)]

    assert len(counting("annotation_battle")) == 1, counting("annotation_battle")
    assert len(counting("annotation_humanjudgement")) == 1, counting("annotation_humanjudgement")
    assert len(listing("annotation_judgerun")) == 1, listing("annotation_judgerun")
    assert len(listing("annotation_snapshot")) == 1, listing("annotation_snapshot")


# --- references by hand ------------------------------------------------------------------------


def test_no_model_note_is_shown_once_for_one_click(researcher, settings):
    settings.OPENAI_REFERENCE_MODEL = ""
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE)
    response = researcher.post(reverse("admin:annotation_instance_changelist"),
                               {"action": "generate_references", "_selected_action": [instance.pk]}, follow=True)
    page = response.content.decode()
    assert page.count("No reference model is configured") == 1
    assert "Nothing was queued" in page


def test_the_paste_a_reference_page_shows_the_images(researcher):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE, image_count=2)
    instance.current_caption = CaptionFactory(instance=instance)
    instance.save()
    page = researcher.get(reverse("admin:annotation_instance_add_reference", args=[instance.pk])).content.decode()
    for image in instance.ordered_images():
        assert f'<img src="{image.display_url}"' in page


# --- the front door and the header -------------------------------------------------------------


def test_the_front_page_sends_researchers_and_annotators_their_ways(client):
    response = client.get("/")
    page = response.content.decode()
    assert response.status_code == 200
    assert 'href="/admin/">Open the admin</a>' in page
    assert 'href="/dashboard/">Dashboard' in page
    assert 'href="/work/">Start annotating</a>' in page and 'href="/work/login/">Log in</a>' in page
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_every_admin_page_links_to_the_dashboard(researcher):
    page = researcher.get(reverse("admin:annotation_instance_changelist")).content.decode()
    assert '<a href="/dashboard/">Dashboard</a>' in page
