"""The admin at the size of a campaign: no form lists a table that grows with the crowd in a
select, and a long list is counted by estimate, not row by row (benchmarks/researcher_pages.py
measures the pages on a world of a million judgements)."""

import random

import pytest
from django.contrib import admin
from django.contrib.admin.widgets import AutocompleteMixin, ForeignKeyRawIdWidget, ManyToManyRawIdWidget
from django.db import connection
from django.forms import TextInput
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.admin import paging
from annotation.models import HumanJudgement, Snapshot, Stage, WorkUnit
from tests.factories import InstanceFactory
from tests.scoring_factories import random_tournament

pytestmark = pytest.mark.django_db

PROJECT_APPS = {"annotation", "mturk", "webhooks", "tasks"}


NOT_A_LIST = ForeignKeyRawIdWidget | ManyToManyRawIdWidget | AutocompleteMixin | TextInput


def _choice_fields(form_class):
    for name, field in form_class.base_fields.items():
        if getattr(field, "queryset", None) is not None:
            widget = getattr(field.widget, "widget", field.widget)
            yield name, field.queryset.model._meta.label, widget


def test_no_admin_form_offers_a_table_that_grows_with_the_crowd_as_a_select(admin_user):
    request = RequestFactory().get("/")
    request.user = admin_user
    selects = []
    for model, model_admin in admin.site._registry.items():
        if not (model_admin.has_change_permission(request) or model_admin.has_add_permission(request)):
            continue  # read only: the change page shows each row's name, not a choice
        forms = [(model._meta.label, model_admin.get_form(request))]
        forms += [(f"{model._meta.label} inline {type(inline).__name__}", inline.get_formset(request).form)
                  for inline in model_admin.get_inline_instances(request)]
        for where, form_class in forms:
            readonly = set(model_admin.get_readonly_fields(request))
            for name, related, widget in _choice_fields(form_class):
                if name in readonly or related in paging.RESEARCHER_SIZED:
                    continue
                # A raw id, a search, or a name typed (a group's new member): never a list of every row.
                if not isinstance(widget, NOT_A_LIST):
                    selects.append(f"{where}.{name} -> {related}")
    assert selects == []


def test_a_list_longer_than_the_exact_limit_is_counted_by_the_planners_estimate(admin_client, monkeypatch):
    monkeypatch.setattr(paging, "EXACT_COUNT_UP_TO", 5)
    instance = InstanceFactory()
    units = WorkUnit.objects.bulk_create([WorkUnit(stage=Stage.CAPTION, key=f"unit-{n}", instance=instance,
                                                   family=instance.family) for n in range(40)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotation_workunit")
    page = admin_client.get(reverse("admin:annotation_workunit_changelist")).content.decode()
    assert "about</span> " in page
    estimated = int(page.split("about</span> ")[1].split()[0])
    assert estimated == 40  # the statistics ANALYZE gathered, no row read to count

    # A filtered list no longer than the limit is exact, however large the table.
    page = admin_client.get(reverse("admin:annotation_workunit_changelist"),
                            {"q": units[7].key}).content.decode()
    assert "about</span>" not in page
    assert "1 work unit" in page


def test_a_short_list_is_counted_exactly(admin_client):
    instance = InstanceFactory()
    WorkUnit.objects.create(stage=Stage.CAPTION, key="only-unit", instance=instance, family=instance.family)
    page = admin_client.get(reverse("admin:annotation_workunit_changelist")).content.decode()
    assert "about</span>" not in page
    assert "1 work unit" in page


def test_every_table_that_grows_with_the_crowd_lists_with_an_estimated_count():
    counted_row_by_row = [
        model._meta.label for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in PROJECT_APPS and model._meta.label not in paging.RESEARCHER_SIZED
        and not (model_admin.paginator is paging.EstimatedCountPaginator
                 and model_admin.show_full_result_count is False)]
    assert counted_row_by_row == []


def _tournaments(count, rng, *, first=0):
    return [random_tournament(name=f"Tournament {n}", rng=rng, models=4, questions=3 + n, pairs_per_question=2,
                              judgements_per_battle=2, judge_runs=0) for n in range(first, first + count)]


@pytest.mark.parametrize("page", ["admin:annotation_tournament_changelist", "dashboard:index"])
def test_each_tournaments_progress_is_counted_in_the_same_queries_however_many_are_listed(
        admin_client, page, django_assert_max_num_queries):
    rng = random.Random(30)
    tournaments = _tournaments(2, rng)
    with CaptureQueriesContext(connection) as two:
        first = admin_client.get(reverse(page)).content.decode()
    tournaments += _tournaments(3, rng, first=2)
    with django_assert_max_num_queries(len(two)):
        listed = admin_client.get(reverse(page)).content.decode()
    for tournament in tournaments:
        battles = tournament.battles.count()
        judgements = HumanJudgement.objects.filter(battle__tournament=tournament).count()
        assert judgements == 2 * battles > 0
        shown = f"{judgements}/{battles * tournament.judgements_per_pair}"
        assert shown in listed.replace(" / ", "/")
    assert "Tournament 0" in first


def test_a_human_judgement_names_its_battles_tournament_however_it_is_saved(admin_client):
    tournament, other = _tournaments(2, random.Random(31))
    judgement = HumanJudgement.objects.filter(battle__tournament=tournament).first()
    assert judgement.tournament_id == tournament.pk
    judgement.battle = other.battles.first()
    judgement.save()
    judgement.refresh_from_db()
    assert judgement.tournament_id == other.pk


def test_the_judge_verdicts_list_names_every_run_in_its_filter_in_the_same_queries_however_many(
        admin_client, django_assert_max_num_queries):
    rng = random.Random(32)
    random_tournament(name="Judged", rng=rng, models=3, questions=2, pairs_per_question=1, judge_runs=1)
    url = reverse("admin:annotation_judgejudgement_changelist")
    with CaptureQueriesContext(connection) as one_run:
        admin_client.get(url)
    random_tournament(name="Judged again", rng=rng, models=3, questions=2, pairs_per_question=1, judge_runs=3)
    with django_assert_max_num_queries(len(one_run)):
        page = admin_client.get(url, {"criterion": "overall"}).content.decode()
    assert page.count("judge-") >= 4  # each run is named in the run filter
    assert "relevance and completeness" in page  # CHIRP's criteria, without reading every verdict


def test_model_answers_are_found_by_model_name_in_any_case_or_by_instance_number(admin_client):
    tournament = random_tournament(name="Searched", rng=random.Random(33), models=3, questions=2,
                                   pairs_per_question=1, judge_runs=0)
    response = tournament.battles.first().response_a
    url = reverse("admin:annotation_modelresponse_changelist")
    by_name = admin_client.get(url, {"q": response.model_name.upper()}).context["cl"].result_list
    assert {answer.model_name for answer in by_name} == {response.model_name}
    by_instance = admin_client.get(url, {"q": str(response.instance_id)}).context["cl"].result_list
    assert {answer.instance_id for answer in by_instance} == {response.instance_id}
    assert len(by_instance) == 3


@pytest.mark.parametrize("url", ["/api/snapshots/", "/admin/annotation/snapshot/"])
def test_lists_of_snapshots_leave_each_ones_instance_digests_unread(admin_client, url):
    # Megabytes a snapshot at campaign size; only a diff reads them.
    Snapshot.objects.create(version=1, instance_digests={str(n): "0" * 64 for n in range(100)})
    with CaptureQueriesContext(connection) as queries:
        assert admin_client.get(url).status_code == 200
    assert not [query for query in queries if "instance_digests" in query["sql"]]
    assert len(Snapshot.objects.get(version=1).instance_digests) == 100  # still there when read


def _stage_of_timed_answers():
    """A caption stage where a worker took 10 s and three others 40, 50 and 60 s; and `answer(n,
    worker, seconds)` to add one."""
    from django.utils import timezone

    from annotation.models import Assignment
    from tests.factories import WorkerFactory

    instance = InstanceFactory()
    worker, others = WorkerFactory(), [WorkerFactory() for _ in range(4)]
    now = timezone.now()

    def answer(n, who, seconds):
        unit = WorkUnit.objects.create(stage=Stage.CAPTION, key=f"median-{n}", instance=instance,
                                       family=instance.family)
        Assignment.objects.create(unit=unit, worker=who, status=Assignment.Status.SUBMITTED, lease_expires_at=now,
                                  submitted_at=now, active_seconds=seconds)

    for n, (who, seconds) in enumerate([(worker, 10), (others[0], 40), (others[1], 50), (others[2], 60)]):
        answer(n, who, seconds)
    return worker, others, answer


def test_with_a_cache_of_the_process_own_the_stages_median_is_computed_and_kept_in_the_request(
        monkeypatch, fresh_cache):
    """The embedded default's memory cache is not the worker's: a job's figure would never reach
    the page."""
    from annotation import worker_report

    worker, others, _ = _stage_of_timed_answers()
    monkeypatch.setattr(worker_report, "EXACT_MEDIAN_UP_TO", 2)
    assert worker_report._others_median(Stage.CAPTION, worker, None) == 45  # the whole stage's
    with CaptureQueriesContext(connection) as queries:
        assert worker_report._others_median(Stage.CAPTION, others[0], None) == 45
    assert len(queries) == 1  # the bounded count; the median was kept


def test_past_the_exact_limit_a_stages_median_time_is_the_whole_stages_kept_by_a_job_and_never_waited_for(
        monkeypatch, cache_redis, django_capture_on_commit_callbacks):
    import time

    from django.core.cache import cache

    from annotation import worker_report
    from tasks.models import Job
    from tasks.scoring import keep_stage_median_job

    worker, others, answer = _stage_of_timed_answers()
    assert worker_report._others_median(Stage.CAPTION, worker, None) == 50  # exact: the three others

    monkeypatch.setattr(worker_report, "EXACT_MEDIAN_UP_TO", 2)
    # Never kept yet: the page does not wait for the whole stage's sort, it asks the job for it.
    with django_capture_on_commit_callbacks() as asked:
        assert worker_report._others_median(Stage.CAPTION, worker, None) is None
        assert worker_report._others_median(Stage.CAPTION, others[0], None) is None
    assert len(asked) == 1, "one job however many pages asked"

    asked[0]()  # sent to this test's broker, where no worker takes it: the job's body is run below
    assert Job.objects.get(task=worker_report.STAGE_MEDIAN_JOB).args == [Stage.CAPTION, None]
    keep_stage_median_job.run(Stage.CAPTION, None)
    with CaptureQueriesContext(connection) as queries:
        assert worker_report._others_median(Stage.CAPTION, others[0], None) == 45  # the whole stage's
    assert len(queries) == 1  # the bounded count; the median was kept

    # Stale: served as it was while the job computes it again with the answer given since.
    answer(4, others[3], 100)
    cache.set("worker-report:stage-median:caption:no-group",
              (45, time.time() - worker_report.STAGE_MEDIAN_SECONDS - 1), None)
    with django_capture_on_commit_callbacks() as asked:
        assert worker_report._others_median(Stage.CAPTION, worker, None) == 45
        assert worker_report._others_median(Stage.CAPTION, worker, None) == 45
    assert len(asked) == 1
    keep_stage_median_job.run(Stage.CAPTION, None)
    assert worker_report._others_median(Stage.CAPTION, worker, None) == 50


def test_a_page_past_an_estimate_that_fell_short_is_still_served_while_it_has_rows(monkeypatch):
    from django.core.paginator import EmptyPage

    monkeypatch.setattr(paging, "EXACT_COUNT_UP_TO", 5)
    instance = InstanceFactory()
    make = lambda first, count: WorkUnit.objects.bulk_create(  # noqa: E731
        [WorkUnit(stage=Stage.CAPTION, key=f"unit-{n}", instance=instance, family=instance.family)
         for n in range(first, first + count)])
    make(0, 40)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotation_workunit")
    make(40, 20)  # after the statistics: the planner expects fewer rows than there are
    pages = paging.EstimatedCountPaginator(WorkUnit.objects.order_by("pk"), per_page=5)
    assert pages.count < 60 and pages.count_is_estimated and pages.num_pages < 12
    assert [unit.key for unit in pages.page(12)] == [f"unit-{n}" for n in range(55, 60)]
    with pytest.raises(EmptyPage):
        pages.page(13)
