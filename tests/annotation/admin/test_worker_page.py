"""A worker's page for researchers: answers per stage, time, gold, agreement with the others and
flags with their evidence, the answers to review one click away, and reviewing every provisional
answer of the worker from there. Staff only."""

import html
import time

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.crowdwork import queue
from annotation.crowdwork.next_step import Step, next_step
from annotation.models import (
    Assignment,
    GoldAnswer,
    GoldItem,
    HumanJudgement,
    ModelResponse,
    Reference,
    Stage,
    StageQualification,
    Worker,
    WorkerBlock,
    WorkerModel,
    WorkerReliability,
    WorkState,
    WorkUnit,
)
from tests.factories import WorkerFactory
from tests.frontend_support import prolific_link, study, verification_unit
from tests.mturk_wire import assignment
from tests.review_support import verified_on_mturk
from tests.scoring_factories import create_tournament, verified_instance
from tests.worker_page_support import crowd, flags_in, make_reviewer_who_sees_workers, page_of

pytestmark = pytest.mark.django_db
REASON = "These verifications were submitted in under three seconds each, without opening the images."


@pytest.fixture
def researcher(client):
    client.force_login(make_reviewer_who_sees_workers())
    return client


@pytest.fixture
def the_crowd(db):
    return crowd()


def test_a_worker_who_is_too_fast_is_flagged_with_their_median_against_the_stages(the_crowd, researcher):
    text = page_of(researcher, the_crowd.too_fast)
    assert flags_in(text) == {"too_fast"}
    assert "Verification: median 3 s per task against the stage's 50 s (6% of it" in text
    assert "over 20 answers" in text


def test_a_worker_who_always_picks_left_is_flagged_with_a_binomial_test(the_crowd, researcher):
    text = page_of(researcher, the_crowd.always_left)
    assert flags_in(text) == {"same_side"}
    # 15 of 15 on the left: two-sided p = 2 / 2**15.
    assert "chose the left response 15 of 15 times (100%)" in text and f"p = {2 / 2 ** 15:.2g}" in text


def test_a_worker_who_always_answers_correct_is_flagged_for_leaning_to_it(the_crowd, researcher):
    text = page_of(researcher, the_crowd.always_correct)
    assert flags_in(text) == {"one_option"}
    # The three others decide 15 of the 20 references incorrect, and they said "Correct" of all 15:
    # one-sided p = 1 / 2**15.
    assert ("Leans to “Correct”" in text and "said “Correct” of 15 of the 15 references the other verifiers' "
            "majority called “Incorrect”, over 20 answers compared with theirs" in text
            and f"p = {1 / 2 ** 15:.2g}" in text)


def test_a_worker_who_copies_captions_is_flagged_with_the_copied_text(the_crowd, researcher):
    text = page_of(researcher, the_crowd.copier)
    assert flags_in(text) == {"copies"}
    assert "the same caption (ignoring case and spacing) for 3 different instances, in 1 group" in text
    assert "A red bicycle against a blue door." in text


def test_a_steady_worker_has_no_flag_and_agrees_with_the_others(the_crowd, researcher):
    text = page_of(researcher, the_crowd.steady)
    assert flags_in(text) == set()
    assert "No flag" in text
    # Every verification equals the majority of the three others; in pairwise the always-left
    # worker splits the others on the battles where it chose B, which are not compared.
    assert "<td>Verification</td><td class=\"number\">20</td><td class=\"number\">20</td>" \
           "<td class=\"number\">20 (100%)</td>" in text
    assert "<td>Pairwise preference</td><td class=\"number\">15</td><td class=\"number\">7</td>" \
           "<td class=\"number\">7 (100%)</td>" in text


def test_the_page_shows_answers_per_state_time_and_gold_accuracy(the_crowd, researcher):
    worker = the_crowd.steady
    Assignment.objects.filter(worker=worker, unit__stage=Stage.VERIFICATION, active_seconds__lt=45).update(
        work_state=WorkState.REJECTED)
    qualification = StageQualification.objects.create(stage=Stage.VERIFICATION, name="Verify", description="Try")
    item = GoldItem.objects.create(qualification=qualification, content={}, question="Correct?",
                                   options=["correct", "incorrect"], answer="correct")
    for correct in (True, True, True, False):
        GoldAnswer.objects.create(item=item, worker=worker, source=GoldAnswer.Source.LIVE, answer="x",
                                  correct=correct)
    text = page_of(researcher, worker)
    # Verification times are 40..59 s, so 5 answers under 45 s are rejected; the median is 49.5.
    assert ('<tr data-stage="verification"><td>Verification</td><td class="number">15</td>'
            '<td class="number">0</td><td class="number">5</td>') in text
    assert '<td class="number">50</td><td class="number">50</td>' in text  # mean 49.5, median 49.5
    assert '<td>Verification</td><td class="number">4</td><td class="number">3</td><td class="number">75%</td>' in text


def _many_pairwise_answers(worker, count):
    """`count` battles on one instance, each answered once by `worker`, written in bulk."""
    instance = verified_instance()
    responses = ModelResponse.objects.bulk_create(
        ModelResponse(instance=instance, model_name=f"model-{n}", text=f"Answer {n}.") for n in range(64))
    tournament = create_tournament(name="Many battles", sample=False)
    pairs = [(a, b) for i, a in enumerate(responses) for b in responses[i + 1:]][:count]
    battles = tournament.battles.model.objects.bulk_create(
        tournament.battles.model(tournament=tournament, instance=instance, response_a=a, response_b=b)
        for a, b in pairs)
    units = WorkUnit.objects.bulk_create(
        WorkUnit(stage=Stage.PAIRWISE, key=f"battle:{battle.pk}", family=instance.family, battle=battle)
        for battle in battles)
    now = timezone.now()
    leases = Assignment.objects.bulk_create(
        Assignment(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED, lease_expires_at=now,
                   submitted_at=now, active_seconds=20 + n % 40) for n, unit in enumerate(units))
    HumanJudgement.objects.bulk_create(
        HumanJudgement(battle=battle, tournament_id=battle.tournament_id, worker=worker, assignment=lease,
                       shown_left="ab"[n % 2],
                       choice="left" if n % 3 else "right")
        for n, (battle, lease) in enumerate(zip(battles, leases, strict=True)))


def test_the_page_costs_the_same_few_queries_for_a_worker_with_thousands_of_answers(
        the_crowd, researcher, django_assert_max_num_queries):
    # 15: the session, the user and their permissions, their research groups (whether the review
    # links may act, annotation/teams.py), seven aggregates, a bounded count and the stage's median
    # for each stage the worker answered in (one here), and the worker models' estimates
    # (annotation/worker_report.py), however many answers the worker has.
    busy = WorkerFactory()
    _many_pairwise_answers(busy, 2000)
    page_of(researcher, the_crowd.steady)  # SciPy's first import is the process's, not the page's
    started = time.perf_counter()
    with django_assert_max_num_queries(15):
        text = page_of(researcher, busy)
    seconds = time.perf_counter() - started
    assert '<td>Pairwise preference</td><td class="number">2000</td>' in text
    assert seconds < 2, f"the page took {seconds:.1f} s for 2,000 answers"


def test_the_worker_models_estimates_stand_beside_the_median_of_every_worker_they_fitted(the_crowd, researcher):
    fitted = timezone.now()
    for worker, reliability in ((the_crowd.steady, 0.93), (WorkerFactory(), 0.81), (WorkerFactory(), 0.52)):
        WorkerReliability.objects.create(worker=worker, stage=Stage.VERIFICATION, model=WorkerModel.DAWID_SKENE,
                                         reliability=reliability, answers=40, fitted_at=fitted)
    text = html.unescape(page_of(researcher, the_crowd.steady))
    estimate = text[text.index("Estimated reliability"):]
    assert "<td>Verification</td><td>Dawid-Skene</td><td>every family</td>" in estimate
    assert '<td class="number">0.930</td><td class="number">0.810</td><td class="number">40</td>' in estimate


def test_a_worker_no_model_has_fitted_is_said_to_have_no_estimate(the_crowd, researcher):
    text = html.unescape(page_of(researcher, the_crowd.steady))
    assert "No worker model has been fitted on this worker's answers yet" in text


# --- who may see it ---------------------------------------------------------------------------------


def _participant():
    """A Prolific participant who arrived by their study link and holds a task."""
    verification_unit()
    study(platform=Worker.Platform.PROLIFIC, stage=Stage.VERIFICATION)
    participant = Client()
    arrived = participant.get(prolific_link(Stage.VERIFICATION), follow=True)
    assert arrived.status_code == 200 and arrived.context["assignment"] is not None
    return participant


def _annotator():
    """An in-house annotator signed in with their account."""
    user = get_user_model().objects.create_user("annotator", password="pw")
    Worker.objects.create(platform=Worker.Platform.LOCAL, external_id="annotator", user=user)
    annotator = Client()
    annotator.force_login(user)
    return annotator


def test_an_annotator_or_a_participant_gets_nothing_of_the_page(the_crowd):
    url = reverse("admin:annotation_worker_page", args=[the_crowd.too_fast.pk])
    for who, client in (("participant", _participant()), ("annotator", _annotator())):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), who
        assert b"Too fast" not in response.content
        review = client.post(reverse("admin:annotation_worker_review", args=[the_crowd.too_fast.pk]),
                             {"decision": "reject", "reason": "Spam.", "stage": ""})
        assert review.status_code == 302 and review["Location"].startswith("/admin/login/"), who
    assert not Assignment.objects.filter(work_state=WorkState.REJECTED).exists()


def test_staff_without_the_worker_view_permission_are_refused(the_crowd, client):
    client.force_login(get_user_model().objects.create_user("intern", password="pw", is_staff=True))
    assert client.get(reverse("admin:annotation_worker_page", args=[the_crowd.too_fast.pk])).status_code == 403
    reviewer_without_change = get_user_model().objects.create_user("reader", password="pw", is_staff=True)
    reviewer_without_change.user_permissions.add(Permission.objects.get(codename="view_worker"))
    client.force_login(reviewer_without_change)
    text = page_of(client, the_crowd.too_fast)
    assert "You may view this worker but not review their answers." in text
    refused = client.post(reverse("admin:annotation_worker_review", args=[the_crowd.too_fast.pk]),
                          {"decision": "reject", "reason": "Spam.", "stage": ""})
    assert refused.status_code == 403
    assert not Assignment.objects.filter(work_state=WorkState.REJECTED).exists()


# --- one click away ---------------------------------------------------------------------------------


def test_the_worker_admin_and_the_answers_list_link_to_the_page_and_the_page_to_the_answers(the_crowd,
                                                                                             researcher):
    worker = the_crowd.too_fast
    page = reverse("admin:annotation_worker_page", args=[worker.pk])
    assert f'href="{page}"' in researcher.get(reverse("admin:annotation_worker_changelist")).content.decode()
    assert f'href="{page}"' in researcher.get(reverse("admin:annotation_worker_change", args=[worker.pk])
                                              ).content.decode()
    answers = researcher.get(reverse("admin:annotation_answer_changelist") + f"?worker__id__exact={worker.pk}")
    assert f'href="{page}"' in answers.content.decode()

    text = page_of(researcher, worker)
    filtered = f"/admin/annotation/answer/?worker__id__exact={worker.pk}&unit__stage__exact=verification"
    assert f'href="{filtered}"' in text.replace("&amp;", "&")
    listed = researcher.get(filtered)
    assert listed.status_code == 200 and "20 answers to review" in listed.content.decode()


def test_rejecting_every_provisional_answer_from_the_page_reopens_their_units_and_rejects_them_on_mturk(
        client, mturk):
    spammer = WorkerFactory(external_id="A1SPAMMER00000009")
    study, leases = verified_on_mturk(mturk, spammer)
    assert set(Reference.objects.values_list("verdict", flat=True)) == {Reference.Verdict.CORRECT}
    client.force_login(make_reviewer_who_sees_workers())
    for lease in leases:
        record = assignment(assignment_id=lease.platform_assignment_id, worker_id=spammer.external_id,
                            hit_id=lease.platform_listing_id)
        mturk.expect("get_assignment", {"Assignment": record}, {"AssignmentId": lease.platform_assignment_id})
        mturk.expect("reject_assignment", {}, {"AssignmentId": lease.platform_assignment_id,
                                               "RequesterFeedback": REASON})

    done = client.post(reverse("admin:annotation_worker_review", args=[spammer.pk]),
                       {"decision": "reject", "stage": Stage.VERIFICATION, "reason": REASON}, follow=True)

    mturk.done()
    messages = [str(message) for message in get_messages(done.wsgi_request)]
    assert any("2 answer(s) rejected" in message and "2 decision(s) reopened" in message for message in messages)
    assert sum("rejected there" in message for message in messages) == 2
    assert set(Assignment.objects.filter(pk__in=[lease.pk for lease in leases]).values_list(
        "work_state", "review_reason")) == {(WorkState.REJECTED, REASON)}
    assert set(Reference.objects.values_list("verdict", flat=True)) == {Reference.Verdict.PENDING}
    other = WorkerFactory()
    assert queue.next_assignment(worker=other, stage=Stage.VERIFICATION).unit_id in {lease.unit_id for lease in leases}
    assert "Provisional answers (0)" in html.unescape(done.content.decode())


def test_rejecting_without_a_reason_changes_nothing_and_says_why(the_crowd, researcher):
    done = researcher.post(reverse("admin:annotation_worker_review", args=[the_crowd.too_fast.pk]),
                           {"decision": "reject", "stage": "", "reason": ""}, follow=True)
    messages = [str(message) for message in get_messages(done.wsgi_request)]
    assert any(message.startswith("Say why") for message in messages)
    assert not Assignment.objects.filter(work_state=WorkState.REJECTED).exists()


def test_the_decision_starts_with_no_choice_made(the_crowd, researcher):
    page = researcher.get(reverse("admin:annotation_worker_page", args=[the_crowd.too_fast.pk]))
    decision = page.context["form"]["decision"]
    assert decision.value() is None
    text = page.content.decode()
    assert 'name="decision" value="reject"' in text and 'name="decision" value="accept"' in text
    assert "checked" not in str(decision)


def test_reviewing_without_a_decision_is_refused_with_a_message_and_rejects_nothing(the_crowd, researcher):
    provisional = Assignment.objects.filter(worker=the_crowd.too_fast, work_state=WorkState.PROVISIONAL).count()
    assert provisional
    done = researcher.post(reverse("admin:annotation_worker_review", args=[the_crowd.too_fast.pk]),
                           {"stage": "", "reason": "Looked fine to me."}, follow=True)
    messages = [str(message) for message in get_messages(done.wsgi_request)]
    assert messages == ["Choose Accept or Reject: nothing was reviewed."]
    assert Assignment.objects.filter(worker=the_crowd.too_fast, work_state=WorkState.PROVISIONAL).count() == provisional


def test_rejecting_from_the_page_with_stop_this_worker_blocks_them(the_crowd, researcher, mturk):
    worker = the_crowd.always_correct
    assert "Also stop this worker getting more tasks" in page_of(researcher, worker)
    mturk.expect("create_worker_block", {}, {"WorkerId": worker.external_id, "Reason": REASON})

    researcher.post(reverse("admin:annotation_worker_review", args=[worker.pk]),
                    {"decision": "reject", "stage": Stage.VERIFICATION, "reason": REASON, "stop_workers": "on"})

    mturk.done()
    assert WorkerBlock.objects.get(worker=worker).reason == REASON
    assert next_step(worker=worker, stage=Stage.VERIFICATION).kind == Step.BLOCKED


def test_stopping_a_worker_while_accepting_their_answers_is_refused_and_changes_nothing(the_crowd, researcher):
    done = researcher.post(reverse("admin:annotation_worker_review", args=[the_crowd.steady.pk]),
                           {"decision": "accept", "stage": "", "reason": "", "stop_workers": "on"}, follow=True)
    messages = [str(message) for message in get_messages(done.wsgi_request)]
    assert any("A worker is stopped along with a rejection" in message for message in messages)
    assert not WorkerBlock.objects.exists()
    assert not Assignment.objects.filter(work_state=WorkState.ACCEPTED).exists()
