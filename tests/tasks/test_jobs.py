"""Background jobs: the one door they go out of, their leases, their record and the outbox sweep."""

from datetime import timedelta

import psycopg
import pytest
import redis
from django.conf import settings
from django.db import connection, connections
from django.utils import timezone

from annotation.exceptions import AnnotationError
from annotation.judging import progress, runner
from annotation.llm import REFERENCE_KEY_MISSING
from annotation.models import Battle, EndpointCall, Instance, JudgeRun, ModelEndpoint, Tournament
from tasks import outbox
from tasks.jobs import _lock_ids, job_key
from tasks.judging import run_judge_job
from tasks.models import Job
from tasks.pipeline import generate_reference_job
from tests.factories import CaptionFactory, InstanceFactory
from tests.openai_fake import completion
from tests.scoring_factories import create_tournament, verified_instance, with_responses

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker(settings):
    """The Redis test broker, emptied before and after, as a client to count what was queued."""
    if connection.vendor != "postgresql" or not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs DATABASE_URL for PostgreSQL and CELERY_BROKER_URL for Redis (make test)")
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete("celery")
    yield client
    client.delete("celery")


@pytest.fixture
def other_session():
    """A second PostgreSQL session, as another worker holding a lease would have."""
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"],
                         password=db["PASSWORD"] or None, dbname=db["NAME"], autocommit=True) as conn:
        yield conn


def hold_lease(session, kind, number):
    session.execute("SELECT pg_advisory_lock(%s, %s)", _lock_ids(kind, number))


def awaiting_reference(minutes_ago=30):
    instance = InstanceFactory(status=Instance.Status.AWAITING_REFERENCE)
    caption = CaptionFactory(instance=instance)
    Instance.objects.filter(pk=instance.pk).update(
        current_caption=caption, updated_at=timezone.now() - timedelta(minutes=minutes_ago))
    return instance


def queued_tasks(broker):
    import json

    return [json.loads(message)["headers"]["task"] for message in broker.lrange("celery", 0, -1)]


def one_battle_run():
    instance = verified_instance()
    with_responses(instance, "llava", "otter")
    tournament = create_tournament(name="jobs", include_reference=False)
    return runner.create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)


def test_sweep_queues_a_reference_whose_job_was_lost_and_not_again_while_it_is_queued(
        broker, openai_server):
    instance = awaiting_reference()

    assert outbox.requeue_owed() == 1
    assert outbox.requeue_owed() == 0

    assert queued_tasks(broker) == ["tasks.generate_reference"]
    job = Job.objects.get(key=job_key("tasks.generate_reference", [instance.pk]))
    assert job.status == Job.Status.QUEUED and job.queued_at is not None


def test_sweep_leaves_work_just_made_to_its_own_job(broker, openai_server):
    awaiting_reference(minutes_ago=0)

    assert outbox.requeue_owed() == 0


def test_sweep_sends_at_once_a_job_the_broker_refused(broker, openai_server):
    instance = awaiting_reference(minutes_ago=0)
    Job.objects.create(key=job_key("tasks.generate_reference", [instance.pk]),
                       task="tasks.generate_reference", args=[instance.pk], queued_at=None)

    assert outbox.requeue_owed() == 1
    assert queued_tasks(broker) == ["tasks.generate_reference"]


def test_sweep_closes_a_job_row_whose_work_was_done_another_way_and_says_why(broker, openai_server):
    # The reference job's message was lost; meanwhile a researcher pasted the reference, so the
    # instance waits for nothing, and the row would say "queued" for good.
    lost, recent = awaiting_reference(), awaiting_reference()
    for instance in (lost, recent):
        Job.objects.create(key=job_key("tasks.generate_reference", [instance.pk]), task="tasks.generate_reference",
                           args=[instance.pk], queued_at=timezone.now())
        Instance.objects.filter(pk=instance.pk).update(status=Instance.Status.AWAITING_VERIFICATION)
    unrelated = Job.objects.create(key="tasks.export_preferences:1", task="tasks.export_preferences", args=[1],
                                   queued_at=timezone.now())
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Job.objects.exclude(args=[recent.pk]).update(updated_at=an_hour_ago)

    assert outbox.requeue_owed() == 0
    closed = Job.objects.get(key=job_key("tasks.generate_reference", [lost.pk]))
    assert closed.status == Job.Status.DONE
    assert "nothing of this job was owed any more (its work was done another way" in closed.note
    # One queued a moment ago may still be in hand; a job the sweep cannot read the work of is left.
    assert Job.objects.get(key=job_key("tasks.generate_reference", [recent.pk])).status == Job.Status.QUEUED
    unrelated.refresh_from_db()
    assert (unrelated.status, unrelated.note) == (Job.Status.QUEUED, "")
    assert queued_tasks(broker) == []


def test_sweep_leaves_a_failed_job_and_one_another_worker_holds(broker, openai_server,
                                                                other_session):
    failed, running = awaiting_reference(), awaiting_reference()
    Job.objects.create(key=job_key("tasks.generate_reference", [failed.pk]),
                       task="tasks.generate_reference", args=[failed.pk],
                       status=Job.Status.FAILED, error="no key", queued_at=timezone.now())
    hold_lease(other_session, "reference", running.pk)

    assert outbox.requeue_owed() == 0
    assert queued_tasks(broker) == []


def test_sweep_queues_a_judge_run_left_running_by_a_dead_worker(broker, openai_server):
    run = one_battle_run()
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.RUNNING,
                                              created_at=timezone.now() - timedelta(hours=1))

    assert outbox.requeue_owed() == 1
    assert queued_tasks(broker) == ["tasks.run_judge"]


def test_sweep_queues_the_answers_of_endpoint_calls_a_dead_worker_left_unsettled(broker, openai_server):
    instance = verified_instance()
    tournament = Tournament.objects.create(name="answers")
    endpoint = ModelEndpoint.objects.create(tournament=tournament, model_name="llava-next",
                                            base_url=openai_server.base_url, model="llava", api_key_env="KEY")
    call = EndpointCall.objects.create(endpoint=endpoint, instance=instance, status=EndpointCall.Status.SENT)
    EndpointCall.objects.filter(pk=call.pk).update(created_at=timezone.now() - timedelta(hours=1))

    assert outbox.requeue_owed() == 1
    assert queued_tasks(broker) == ["tasks.generate_answers"]


def test_second_copy_of_a_reference_job_exits_without_calling_the_model(openai_server,
                                                                          other_session):
    instance = awaiting_reference()
    hold_lease(other_session, "reference", instance.pk)

    generate_reference_job.apply(args=[instance.pk])

    assert openai_server.requests == []
    assert not instance.references.exists()


def test_reference_job_without_a_key_fails_with_the_reason_on_the_dashboard(
        openai_server, settings, admin_client):
    settings.OPENAI_API_KEY = ""
    instance = awaiting_reference()

    generate_reference_job.apply(args=[instance.pk])

    job = Job.objects.get(key=job_key("tasks.generate_reference", [instance.pk]))
    assert (job.status, job.error) == (Job.Status.FAILED, REFERENCE_KEY_MISSING)
    assert openai_server.requests == []
    page = admin_client.get("/dashboard/").content.decode()
    assert "Background jobs that failed" in page and "OPENAI_API_KEY is not" in page
    listing = admin_client.get("/admin/tasks/job/?status=failed").content.decode()
    assert "OPENAI_API_KEY is not" in listing


def test_judge_run_without_a_key_ends_failed_with_the_reason_in_admin_and_dashboard(
        settings, admin_client):
    settings.JUDGE_API_KEY = ""
    run = one_battle_run()

    run_judge_job.apply(args=[run.pk])

    run.refresh_from_db()
    assert run.status == JudgeRun.Status.FAILED and "JUDGE_API_KEY" in run.error
    assert "JUDGE_API_KEY" in admin_client.get("/dashboard/").content.decode()
    change = admin_client.get(f"/admin/annotation/judgerun/{run.pk}/change/").content.decode()
    assert "Failed" in change and "JUDGE_API_KEY" in change


def test_judge_run_is_judged_in_chunks_with_money_counted_once(judge_server, settings):
    settings.JUDGE_CHUNK_ROUNDS, settings.JUDGE_CONCURRENCY = 1, 2  # one battle (two orderings) per chunk
    instance = verified_instance()
    with_responses(instance, "llava", "otter", "idefics")
    tournament = create_tournament(name="chunks", include_reference=False)
    run = runner.create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    judge_server.default = completion("Overall, Response A is better.", prompt_tokens=100,
                                      completion_tokens=10)

    assert runner.start_judge_run(run=run) == [0, 1, 2]
    assert runner.judge_chunk(run=run, index=1) is False
    assert progress.unfinished_chunks(run) == [0, 2]
    runner.judge_chunk(run=run, index=1)  # a second delivery: everything is stored already
    assert len(judge_server.requests) == 2
    assert runner.judge_chunk(run=run, index=0) is False
    assert runner.judge_chunk(run=run, index=2) is True
    run = runner.finish_judge_run(run=run)

    assert (run.status, run.progress, run.judgements.count()) == (JudgeRun.Status.DONE, "6/6", 6)
    assert (run.prompt_tokens, run.completion_tokens, len(judge_server.requests)) == (600, 60, 6)


def test_a_battle_moved_to_another_tournament_neither_ends_a_run_early_nor_holds_it_open(
        judge_server, settings):
    # A battle can be moved in the admin and keeps its judgements: the run is judged when every
    # battle still in its tournament is, whatever it judged elsewhere.
    settings.JUDGE_CHUNK_ROUNDS, settings.JUDGE_CONCURRENCY = 1, 2  # one battle per chunk
    instance = verified_instance()
    with_responses(instance, "llava", "otter", "idefics")
    tournament = create_tournament(name="moved", include_reference=False)
    first = tournament.battles.order_by("pk").first()
    run = runner.create_judge_run(tournament=tournament, mode=JudgeRun.Mode.REFERENCE_FREE)
    judge_server.default = completion("Overall, Response A is better.")
    assert runner.start_judge_run(run=run) == [0, 1, 2]
    runner.judge_chunk(run=run, index=0)
    runner.judge_chunk(run=run, index=1)

    # Two battles judged, one of them now elsewhere: one of the two left is still to judge.
    Battle.objects.filter(pk=first.pk).update(tournament=Tournament.objects.create(name="elsewhere"))
    assert runner.finish_judge_run(run=run).status == JudgeRun.Status.RUNNING
    assert progress.unfinished_chunks(run) == [1]
    assert runner.judge_chunk(run=run, index=1) is True
    assert runner.finish_judge_run(run=run).status == JudgeRun.Status.DONE


@pytest.mark.parametrize("status", [JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING,
                                    JudgeRun.Status.RETRYING])
def test_run_again_is_refused_while_the_run_is_in_progress(status, admin_client):
    run = one_battle_run()
    JudgeRun.objects.filter(pk=run.pk).update(status=status)

    with pytest.raises(AnnotationError, match="once it has finished or failed"):
        runner.run_again(run=run)
    response = admin_client.post("/admin/annotation/judgerun/",
                                 {"action": "rerun", "_selected_action": [run.pk]}, follow=True)
    assert "once it has finished or failed" in response.content.decode()
    run.refresh_from_db()
    assert run.status == status


def test_run_again_queues_a_failed_run_from_the_start(broker):
    run = one_battle_run()
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.FAILED, error="boom")

    runner.run_again(run=run)

    run.refresh_from_db()
    assert (run.status, run.error) == (JudgeRun.Status.PENDING, "")
    assert queued_tasks(broker) == ["tasks.run_judge"]


def test_redis_transport_has_an_explicit_visibility_timeout_above_the_longest_retry_wait():
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("the Redis transport's options are set only for a Redis broker")
    from crowdbench.celery import app

    timeout = app.conf.broker_transport_options["visibility_timeout"]
    assert timeout == settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    assert timeout > 600 and app.conf.task_acks_late and app.conf.task_reject_on_worker_lost


# --- the leaderboard job ------------------------------------------------------------------------


def judged_tournament(name="board"):
    from annotation.crowdwork.queue import next_assignment
    from annotation.preferences.judgements import submit_pairwise_judgement
    from annotation.preferences.tournaments import launch_tournament
    from tests.factories import WorkerFactory

    with_responses(verified_instance(), "llava", "otter", "idefics")
    tournament = create_tournament(name=name, include_reference=False, judgements_per_pair=1)
    launch_tournament(tournament=tournament)
    worker = WorkerFactory()
    while (assignment := next_assignment(worker=worker, stage="pairwise")) is not None:
        submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice="left")
    return tournament


def test_sweep_queues_the_leaderboard_of_a_tournament_whose_job_was_lost(broker):
    tournament = judged_tournament()
    broker.delete("celery")  # the job each judgement queued, lost with a broker without persistence
    Job.objects.all().delete()
    Tournament.objects.filter(pk=tournament.pk).update(created_at=timezone.now() - timedelta(hours=1))

    assert outbox.requeue_owed() == 1
    assert outbox.requeue_owed() == 0

    assert queued_tasks(broker) == ["tasks.refresh_leaderboard"]


def test_sweep_leaves_a_current_leaderboard_and_one_a_worker_is_computing(broker, other_session):
    from annotation.scoring.freshness import refresh_leaderboard

    current, computing = judged_tournament("current"), judged_tournament("computing")
    refresh_leaderboard(tournament=current)
    Job.objects.all().delete()
    Tournament.objects.update(created_at=timezone.now() - timedelta(hours=1))
    hold_lease(other_session, "leaderboard:overall:1000", computing.pk)
    broker.delete("celery")

    assert outbox.requeue_owed() == 0
    assert queued_tasks(broker) == []


def test_a_second_copy_of_the_leaderboard_job_exits_while_another_computes(other_session):
    from annotation.models import LeaderboardResult
    from tasks.scoring import refresh_leaderboard_job

    tournament = judged_tournament()
    hold_lease(other_session, "leaderboard:overall:1000", tournament.pk)

    refresh_leaderboard_job.apply(args=[tournament.pk])

    assert not LeaderboardResult.objects.exists()


def test_postgresql_probes_each_new_session_so_a_vanished_hosts_leases_end(settings):
    """A host that loses power closes none of its connections; unprobed, its session and the leases
    it holds outlive it by the OS's two hours, and the sweep leaves that work alone meanwhile."""
    if connection.vendor != "postgresql":
        pytest.skip("advisory-lock leases and TCP keepalives are PostgreSQL's")
    settings.DATABASE_KEEPALIVE_SECONDS = 30
    session = connections.create_connection("default")  # a process's new connection
    try:
        with session.cursor() as cursor:
            cursor.execute("SELECT name, setting FROM pg_settings WHERE name LIKE 'tcp_keepalives_%' "
                           "OR name = 'tcp_user_timeout'")
            probes = dict(cursor.fetchall())
    finally:
        session.close()
    # A reply on the wire at the death is never probed: unacknowledged for a minute, the session ends too.
    assert probes == {"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "6",
                      "tcp_user_timeout": "60000"}
