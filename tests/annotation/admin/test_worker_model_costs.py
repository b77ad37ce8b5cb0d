"""Where a researcher chooses a verification stage's worker model, each model says what it would cost
to fit at the stage's size, and saving one that would take over a few minutes says so (issue 41)."""

import html

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from annotation import teams, worker_model_costs
from annotation.models import Aggregation, Stage, Verification, WorkUnit
from tests.factories import FamilyFactory, ReferenceFactory, WorkerFactory, launch
from tests.worker_page_support import answer

pytestmark = pytest.mark.django_db
ANSWERS = 100_000 * 3  # a family of 100,000 instances, three verifiers each


@pytest.fixture
def big_stage():
    return launch(FamilyFactory(target_instances=100_000), Stage.VERIFICATION, overlap=3)


def change_url(config):
    return reverse("admin:annotation_stageconfig_change", args=[config.pk])


def posted(config, aggregation):
    return {"family": config.family_id, "stage": config.stage, "overlap": config.overlap,
            "lease_minutes": config.lease_minutes, "verification_rule": config.verification_rule,
            "aggregation": aggregation, "agree_to_decide": config.agree_to_decide,
            "on_incorrect": config.on_incorrect, "max_caption_rounds": config.max_caption_rounds,
            "counts_provisional": "on", "model_min_answers": config.model_min_answers,
            "model_min_posterior": config.model_min_posterior, "stopping": config.stopping,
            "posterior_threshold": config.posterior_threshold, "prior_accuracy": config.prior_accuracy}


def estimate(model, answers=ANSWERS):
    return worker_model_costs.duration(worker_model_costs.fit_seconds(model, answers))


def test_the_stage_settings_name_each_models_fit_time_at_the_stages_size(admin_client, big_stage):
    page = html.unescape(admin_client.get(change_url(big_stage)).content.decode())
    assert f"Dawid-Skene about {estimate(Aggregation.DAWID_SKENE, 100_000)}, GLAD about " \
           f"{estimate(Aggregation.GLAD, 100_000)}, MACE about {estimate(Aggregation.MACE, 100_000)} per 100,000 " \
           "answers" in page
    assert f"At about {ANSWERS:,} answers (this family's to come and every counted one you can see): Dawid-Skene " \
           f"about {estimate(Aggregation.DAWID_SKENE)}, GLAD about {estimate(Aggregation.GLAD)}, MACE about " \
           f"{estimate(Aggregation.MACE)}." in page


def test_choosing_glad_for_a_stage_it_would_take_minutes_to_fit_warns_and_dawid_skene_does_not(admin_client,
                                                                                              big_stage):
    assert worker_model_costs.fit_seconds(Aggregation.GLAD, ANSWERS) > worker_model_costs.SLOW_SECONDS
    assert worker_model_costs.fit_seconds(Aggregation.DAWID_SKENE, ANSWERS) < worker_model_costs.SLOW_SECONDS

    done = admin_client.post(change_url(big_stage), posted(big_stage, Aggregation.GLAD), follow=True)
    warnings = [str(message) for message in get_messages(done.wsgi_request) if message.level_tag == "warning"]
    big_stage.refresh_from_db()
    assert big_stage.aggregation == Aggregation.GLAD
    assert len(warnings) == 1
    assert f"GLAD would take about {estimate(Aggregation.GLAD)} to fit about {ANSWERS:,} answers" in warnings[0]

    done = admin_client.post(change_url(big_stage), posted(big_stage, Aggregation.DAWID_SKENE), follow=True)
    assert not [message for message in get_messages(done.wsgi_request) if message.level_tag == "warning"]


def test_a_small_stage_choosing_glad_is_not_warned(admin_client):
    small = launch(FamilyFactory(target_instances=100), Stage.VERIFICATION, overlap=3)
    done = admin_client.post(change_url(small), posted(small, Aggregation.GLAD), follow=True)
    assert not [message for message in get_messages(done.wsgi_request) if message.level_tag == "warning"]


def test_the_familys_page_shows_the_fit_time_of_its_verification_stage(admin_client, big_stage):
    launch(big_stage.family, Stage.CAPTION, overlap=1)
    page = html.unescape(admin_client.get(reverse("admin:annotation_instructionfamily_change",
                                                  args=[big_stage.family_id])).content.decode())
    assert f"At about {ANSWERS:,} answers (this family's to come" in page


def test_the_estimate_counts_only_answers_the_researcher_may_see(admin_user, django_user_model):
    ours, theirs = teams.create_group(name="Our lab"), teams.create_group(name="Another lab")
    member = django_user_model.objects.create_user("ada", password="pw")
    teams.add_member(group=ours, user=member, role=teams.Role.RESEARCHER)
    stage = launch(FamilyFactory(group=ours, target_instances=100_000), Stage.VERIFICATION, overlap=3)
    elsewhere = FamilyFactory(group=theirs)
    reference = ReferenceFactory(instance__family=elsewhere)
    unit = WorkUnit.objects.create(stage=Stage.VERIFICATION, key=f"reference:{reference.pk}", family=elsewhere,
                                   reference=reference, overlap=1)
    worker = WorkerFactory()
    Verification.objects.create(reference=reference, worker=worker, is_correct=True,
                                assignment=answer(worker, unit, seconds=5))

    assert worker_model_costs.verification_fit_size(stage, member) == ANSWERS
    assert worker_model_costs.verification_fit_size(stage, admin_user) == ANSWERS + 1
