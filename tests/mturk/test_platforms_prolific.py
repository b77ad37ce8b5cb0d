"""Prolific through its API, against a loopback server answering as its docs describe."""

from decimal import Decimal

import pytest

from annotation.models import Stage
from mturk import links
from mturk.exceptions import PlatformError
from mturk.models import AuditLog, Bonus, CrowdStudy, Submission
from mturk.services import reviewing, syncing
from tests.factories import FamilyFactory, WorkerFactory, launch, submitted_in_study
from tests.mturk_wire import make_researcher

pytestmark = pytest.mark.django_db
STUDY_ID = "60f6acb180a7b59ac0621f9e"
LONG_MESSAGE = ("Your captions did not describe the image: each of the three captions repeated the "
                "instruction instead of saying what the picture shows.")


@pytest.fixture(autouse=True)
def public_base_url(settings):
    settings.PUBLIC_BASE_URL = "https://crowdbench.example.org"


def make_study():
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    return CrowdStudy.objects.create(platform="prolific", stage=Stage.CAPTION, family=family,
                                     name="Captions on Prolific", external_id=STUDY_ID,
                                     completion_code="C1ABCD23", reward_usd=Decimal("0.75"))


def participant(prolific, study, pid, *, status="AWAITING REVIEW", stored=True):
    worker = WorkerFactory(platform="prolific", external_id=pid)
    sid = f"sub{pid[-6:]}"
    prolific.submissions[sid] = {"id": sid, "participant_id": pid, "study_id": STUDY_ID,
                                 "status": status, "started_at": "2026-11-20T10:00:00Z",
                                 "completed_at": "2026-11-20T10:04:00Z"}
    if stored:
        submitted_in_study(study, worker, key=f"p-{pid}", platform_assignment_id=sid)
    return worker


def test_study_link_and_completion_redirect():
    study = make_study()
    assert links.study_link(study).endswith(
        "/work/caption/?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}"
        "&SESSION_ID={{%SESSION_ID%}}")
    assert links.completion_redirect(study) == "https://app.prolific.com/submissions/complete?cc=C1ABCD23"


def test_sync_pages_through_submissions_and_keys_them_by_prolifics_ids(prolific):
    study = make_study()
    for n in range(3):
        participant(prolific, study, f"60ffe5c8371090c7041d43f{n}")
    participant(prolific, study, "60ffe5c8371090c7041d43f9", stored=False)
    counts = syncing.sync_study(study=study)
    assert counts == {"ready": 3, "flagged": 1}
    assert set(Submission.objects.values_list("platform_assignment_id", flat=True)) == {
        "sub1d43f0", "sub1d43f1", "sub1d43f2", "sub1d43f9"}
    assert all(h["Authorization"] == "Token prolific-token" for _, _, h, _ in prolific.requests)


def test_bulk_approve_then_reject_needs_100_characters_and_a_category(prolific):
    study = make_study()
    participant(prolific, study, "60ffe5c8371090c7041d43f0")
    participant(prolific, study, "60ffe5c8371090c7041d43f1")
    syncing.sync_study(study=study)
    first, second = Submission.objects.order_by("id")
    researcher = make_researcher()
    done, problems = reviewing.approve_submissions(submissions=[first], actor=researcher)
    assert len(done) == 1 and problems == []
    approve = [r for r in prolific.requests if r[1].endswith("bulk-approve/")][0]
    assert approve[3] == {"submission_ids": [first.platform_assignment_id]}
    done, problems = reviewing.reject_submissions(submissions=[second], actor=researcher,
                                                 message="Too short.", category="LOW_EFFORT")
    assert done == [] and "at least 100 characters" in problems[0]
    done, _ = reviewing.reject_submissions(submissions=[second], actor=researcher,
                                          message=LONG_MESSAGE, category="LOW_EFFORT")
    assert done[0].review == Submission.Review.REJECTED


def test_a_bonus_is_set_up_then_paid_once_whatever_the_clicks(prolific):
    study = make_study()
    participant(prolific, study, "60ffe5c8371090c7041d43f0")
    syncing.sync_study(study=study)
    submission = Submission.objects.get()
    researcher = make_researcher()
    reviewing.approve_submissions(submissions=[submission], actor=researcher)
    bonus = reviewing.create_bonus(submission=Submission.objects.get(), amount="0.50",
                                  reason="Careful captions", actor=researcher)
    reviewing.pay_bonus(bonus=bonus, actor=researcher)
    reviewing.pay_bonus(bonus=bonus, actor=researcher)
    assert prolific.payments == ["bonus000001"]
    assert prolific.bonus_setups["bonus000001"]["csv_bonuses"] == "60ffe5c8371090c7041d43f0,0.50"
    assert Bonus.objects.get().status == Bonus.Status.PAID


def test_a_pay_step_with_an_unknown_outcome_is_never_sent_again(prolific, settings):
    settings.PLATFORM_HTTP_MAX_ATTEMPTS = 1
    study = make_study()
    participant(prolific, study, "60ffe5c8371090c7041d43f0")
    syncing.sync_study(study=study)
    researcher = make_researcher()
    reviewing.approve_submissions(submissions=[Submission.objects.get()], actor=researcher)
    bonus = reviewing.create_bonus(submission=Submission.objects.get(), amount="0.50",
                                  reason="Careful captions", actor=researcher)
    prolific.fail_next_pay = 502
    with pytest.raises(PlatformError):
        reviewing.pay_bonus(bonus=bonus, actor=researcher)
    assert Bonus.objects.get().status == Bonus.Status.PAYING
    with pytest.raises(PlatformError, match="never sent twice"):
        reviewing.pay_bonus(bonus=bonus, actor=researcher)
    assert prolific.payments == []
    assert AuditLog.objects.filter(action="bonus", ok=False).exists()


def test_approving_a_batch_checks_it_against_one_listing_of_the_study(prolific):
    study = make_study()
    for n in range(3):
        participant(prolific, study, f"60ffe5c8371090c7041d43f{n}")
    syncing.sync_study(study=study)
    prolific.requests.clear()
    done, problems = reviewing.approve_submissions(submissions=list(Submission.objects.all()),
                                                  actor=make_researcher())
    assert len(done) == 3 and problems == []
    # The listing's two pages (this server pages by two) and one bulk approval: not a GET each.
    assert [(method, path.split("/api/v1/")[1].split("?")[0]) for method, path, _, _ in prolific.requests] == [
        ("GET", f"studies/{STUDY_ID}/submissions/"), ("GET", f"studies/{STUDY_ID}/submissions/"),
        ("POST", "submissions/bulk-approve/")]
    assert {s["status"] for s in prolific.submissions.values()} == {"APPROVED"}
