"""Toloka through its own client (toloka-kit's TolokaClient), against a loopback server answering
as Toloka's API does (tests/mturk_wire.FakeToloka): the same backend interface and services as
the other platforms, from a study link to a block."""

from decimal import Decimal
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.http import QueryDict

from annotation.crowdwork import review
from annotation.models import Stage, WorkerBlock, WorkState
from mturk import identity, links, participants, pay
from mturk.exceptions import PlatformError
from mturk.models import AuditLog, Bonus, CrowdStudy, Submission
from mturk.services import publishing, reviewing, syncing
from tests.factories import FamilyFactory, WorkerFactory, launch, submitted_in_study
from tests.mturk_wire import make_researcher

pytestmark = pytest.mark.django_db
POOL = "36502086"


@pytest.fixture(autouse=True)
def public_base_url(settings):
    settings.PUBLIC_BASE_URL = "https://crowdbench.example.org"


def make_study(**fields):
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    return CrowdStudy.objects.create(platform="toloka", stage=Stage.CAPTION, family=family,
                                     name="Captions on Toloka", external_id=POOL, completion_code="C1ABCD23",
                                     reward_usd=Decimal("0.75"), **fields)


def tolokers(toloka, study, *users, stored=True):
    """Each Toloker's submitted assignment in the pool, and (`stored`) their work here under it."""
    workers = []
    for n, user in enumerate(users):
        assignment_id = f"0001a2b3c4--{n:024d}"
        toloka.assignment(assignment_id, user_id=user, pool_id=POOL)
        worker = WorkerFactory(platform="toloka", external_id=user)
        if stored:
            submitted_in_study(study, worker, key=f"t-{user}", platform_assignment_id=assignment_id)
        workers.append(worker)
    return workers


def calls_to(toloka):
    return [(method, path.split("?")[0]) for method, path, _, _ in toloka.requests]


def test_the_study_link_reads_back_as_the_toloker_who_arrived():
    study = make_study()
    link = links.study_link(study)
    assert link.endswith("/work/caption/?tolokaUserId={TOLOKA_USER_ID}&tolokaPoolId={TOLOKA_POOL_ID}"
                         "&tolokaAssignmentId={TOLOKA_ASSIGNMENT_ID}")
    values = iter(["a1b0b42923c429daa2c764d7ccfc364d", POOL, "0001a2b3c4--0001"])
    query = QueryDict(mutable=True)
    query.update({name: next(values) for name, _ in parse_qsl(urlsplit(link).query)})
    assert links.study_arrival(query) == links.StudyArrival(
        platform="toloka", participant_id="a1b0b42923c429daa2c764d7ccfc364d", study_id=POOL,
        session_id="0001a2b3c4--0001")


def test_the_code_is_typed_back_into_the_task_as_toloka_has_no_completion_page():
    done = links.completion(make_study())
    assert (done.code, done.return_url, done.platform) == ("C1ABCD23", "", "Toloka")


def test_a_toloker_known_elsewhere_is_admitted_only_when_toloka_confirms_the_assignment(toloka):
    study = make_study()
    toloka.assignment("0001a2b3c4--0001", user_id="U1", pool_id=POOL, status="ACTIVE")
    toloka.assignment("0001a2b3c4--0002", user_id="U2", pool_id=POOL, status="ACTIVE")
    participants.admit_participant(
        arrival=links.StudyArrival(platform="toloka", participant_id="U1", study_id=POOL, session_id=""),
        study=study, arrival_key="k1", known_here=lambda worker_id: False)
    with pytest.raises(identity.IdentityRefused):
        participants.admit_participant(
            arrival=links.StudyArrival(platform="toloka", participant_id="U1", study_id=POOL,
                                       session_id="0001a2b3c4--0002"),
            study=study, known_here=lambda worker_id: False)
    confirmed = participants.admit_participant(
        arrival=links.StudyArrival(platform="toloka", participant_id="U1", study_id=POOL,
                                   session_id="0001a2b3c4--0001"),
        study=study, known_here=lambda worker_id: False)
    assert confirmed.external_id == "U1"
    assert all(h["Authorization"] == "OAuth toloka-token" for _, _, h, _ in toloka.requests)


def test_publishing_records_places_and_says_to_open_them_in_the_pool(toloka):
    study = make_study()
    result = publishing.publish_batch(study=study, tasks=3, actor=make_researcher(), without_open_work=True)
    assert "Toloka" in result.message and toloka.requests == []


def test_sync_pages_through_the_pools_assignments_and_keys_them_by_tolokas_ids(toloka):
    study = make_study()
    tolokers(toloka, study, "U1", "U2", "U3")
    toloka.assignment("0001a2b3c4--9", user_id="U9", pool_id=POOL)
    counts = syncing.sync_study(study=study)
    assert counts == {"ready": 3, "flagged": 1}
    assert set(Submission.objects.values_list("platform_assignment_id", flat=True)) == set(toloka.assignments)
    # Two to a page: the next page asks for the ids after the last one it had.
    pages = [dict(parse_qsl(urlsplit(path).query)) for method, path, _, _ in toloka.requests]
    assert [page.get("id_gt") for page in pages] == [None, "0001a2b3c4--000000000000000000000001"]


def test_approve_and_reject_go_to_toloka_and_a_rejection_needs_a_comment(toloka):
    study = make_study()
    tolokers(toloka, study, "U1", "U2")
    syncing.sync_study(study=study)
    first, second = Submission.objects.order_by("id")
    researcher = make_researcher()
    done, problems = reviewing.approve_submissions(submissions=[first], actor=researcher, feedback="Thanks!")
    assert len(done) == 1 and problems == []
    done, problems = reviewing.reject_submissions(submissions=[second], actor=researcher,
                                                 message="The captions repeat the instruction.")
    assert len(done) == 1 and problems == []
    assert {a["user_id"]: (a["status"], a["public_comment"]) for a in toloka.assignments.values()} == {
        "U1": ("ACCEPTED", "Thanks!"), "U2": ("REJECTED", "The captions repeat the instruction.")}
    assert {s.review for s in Submission.objects.all()} == {Submission.Review.APPROVED, Submission.Review.REJECTED}
    assert second.assignments.get().work_state == WorkState.REJECTED


def test_a_retried_approval_toloka_already_took_counts_as_done(toloka):
    study = make_study()
    tolokers(toloka, study, "U1")
    syncing.sync_study(study=study)
    submission = Submission.objects.get()
    # Toloka took the first request, whose answer was lost: its next answer refuses the change.
    original = toloka.route

    def accepted_then_answer(method, path, headers, body):
        if method == "PATCH":
            original(method, path, headers, body)
            return toloka._error(409, "INAPPROPRIATE_STATUS", "Assignment is ACCEPTED")
        return original(method, path, headers, body)

    toloka.route = accepted_then_answer
    done, problems = reviewing.approve_submissions(submissions=[submission], actor=make_researcher())
    assert len(done) == 1 and problems == []
    row = AuditLog.objects.get(action="approve")
    assert row.ok and "already ACCEPTED on Toloka" in str(row.response)


def test_a_reviewers_rejection_of_the_answers_rejects_the_assignment_on_toloka(toloka):
    study = make_study()
    tolokers(toloka, study, "U1")
    syncing.sync_study(study=study)
    answers = list(Submission.objects.get().assignments.all())
    outcome = review.review_work(assignments=answers, accept=False, reviewer=make_researcher(),
                                 reason="Off-topic captions.")
    assert outcome.changed == 1
    assert outcome.followed == [f"Toloka: the work of {answers[0].worker.pseudonym} was rejected there."]
    assert next(iter(toloka.assignments.values()))["status"] == "REJECTED"
    assert Submission.objects.get().review == Submission.Review.REJECTED


def test_a_rejection_that_is_no_reviewers_decision_is_not_carried_to_toloka(toloka):
    # As a quarantine rejects: the platform's record decided it, so the platform is not told again.
    study = make_study()
    tolokers(toloka, study, "U1")
    syncing.sync_study(study=study)
    toloka.requests.clear()
    answers = list(Submission.objects.get().assignments.all())
    review.reject_work(assignments=answers, reason="Quarantined: another Toloker's assignment.")
    assert toloka.requests == []
    assert next(iter(toloka.assignments.values()))["status"] == "SUBMITTED"


def test_a_bonus_is_paid_once_under_one_operation_id_whatever_the_clicks(toloka):
    study = make_study()
    tolokers(toloka, study, "U1")
    syncing.sync_study(study=study)
    researcher = make_researcher()
    reviewing.approve_submissions(submissions=[Submission.objects.get()], actor=researcher)
    bonus = reviewing.create_bonus(submission=Submission.objects.get(), amount="0.50",
                                  reason="Careful captions", actor=researcher)
    reviewing.pay_bonus(bonus=bonus, actor=researcher)
    reviewing.pay_bonus(bonus=bonus, actor=researcher)
    [paid] = toloka.bonuses.values()
    assert (paid["user_id"], Decimal(str(paid["amount"])), paid["public_message"]) == (
        "U1", Decimal("0.50"), {"EN": "Careful captions"})
    assert Bonus.objects.get().status == Bonus.Status.PAID


def test_a_bonus_sent_again_after_a_lost_answer_is_read_back_not_paid_again(toloka):
    study = make_study()
    tolokers(toloka, study, "U1")
    syncing.sync_study(study=study)
    researcher = make_researcher()
    reviewing.approve_submissions(submissions=[Submission.objects.get()], actor=researcher)
    bonus = reviewing.create_bonus(submission=Submission.objects.get(), amount="0.50",
                                  reason="Careful captions", actor=researcher)
    from mturk.platforms.toloka import TolokaBackend

    # The first request went through; its answer never came back, so the row is not paid yet.
    TolokaBackend().pay_bonus(bonus)
    reviewing.pay_bonus(bonus=bonus, actor=researcher)
    assert len(toloka.bonuses) == 1
    assert ("GET", f"/api/v1/operations/{next(iter(toloka.operations))}") in calls_to(toloka)
    assert Bonus.objects.get().status == Bonus.Status.PAID


def test_blocking_a_toloker_restricts_them_on_every_project_and_here(toloka):
    worker = WorkerFactory(platform="toloka", external_id="U1")
    reviewing.block_worker(worker=worker, reason="Copied captions", actor=make_researcher())
    assert toloka.restrictions == [{"scope": "ALL_PROJECTS", "user_id": "U1", "private_comment": "Copied captions"}]
    assert WorkerBlock.objects.filter(worker=worker, active=True).exists()


def test_a_message_reaches_the_tolokers_in_one_thread(toloka):
    study = make_study()
    workers = tolokers(toloka, study, "U1", "U2", stored=False)
    sent = reviewing.notify_workers(study=study, workers=workers, subject="New tasks",
                                    message="More captions today.", actor=make_researcher())
    assert sent.message == "Toloka accepted the message for 2 of 2 worker(s)."
    assert toloka.threads[0]["recipients_ids"] == ["U1", "U2"]


def test_work_that_is_another_tolokers_is_not_approved(toloka):
    study = make_study()
    [worker] = tolokers(toloka, study, "U1")
    syncing.sync_study(study=study)
    next(iter(toloka.assignments.values()))["user_id"] = "SOMEONE-ELSE"
    done, problems = reviewing.approve_submissions(submissions=[Submission.objects.get()],
                                                  actor=make_researcher())
    assert done == [] and "not this Toloker's" in problems[0]
    assert {a["status"] for a in toloka.assignments.values()} == {"SUBMITTED"}


def test_without_a_token_nothing_is_sent_and_the_researcher_is_told_why(settings):
    settings.TOLOKA_API_TOKEN = ""
    study = make_study()
    with pytest.raises(PlatformError, match="TOLOKA_API_TOKEN is not set") as refused:
        syncing.sync_study(study=study)
    assert refused.value.sent is False


def test_a_pay_plan_says_tolokas_commission_is_the_accounts_to_set(settings):
    settings.PLATFORM_FEE_RATES = {}
    assert "Toloka publishes no commission rate" in pay.billing("toloka").note
    settings.PLATFORM_FEE_RATES = {"toloka": 0.3}
    bill = pay.billing("toloka")
    assert bill.fees(reward=Decimal("0.50"), assignments_per_task=3, tasks=10) == Decimal("4.50")
