"""What a worker's "Your work" page says of reviewed answers (issue 36): a rejected answer is shown
as rejected with the reviewer's reason, never as agreeing with a verdict others reached, and the
page's tallies keep rejected answers apart from the ones that count."""

import pytest
from django.contrib.auth import get_user_model

from annotation.collection import verification
from annotation.crowdwork import queue, review
from annotation.crowdwork.standing import local_worker
from annotation.models import Reference, Stage
from frontend.worker_summary import recent_work, stage_tallies
from tests.factories import WorkerFactory
from tests.frontend_support import logged_in, verification_unit

pytestmark = pytest.mark.django_db

REASON = 'Marked "Correct" in two seconds without opening the image <script>window.__xss=1</script>'


def vote(worker, *, is_correct=True):
    lease = queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)
    verification.submit_verification(assignment_id=lease.pk, worker=worker, is_correct=is_correct,
                                     problem_in_response=not is_correct, active_seconds=2)
    return lease


@pytest.fixture
def rejected_then_decided_by_another():
    """Ann's "Correct" vote is rejected; the reference is asked again and another verifier decides
    it "Correct" too, so Ann's vote agrees with a verdict it had no part in."""
    unit = verification_unit()
    client = logged_in("ann")
    ann = local_worker(get_user_model().objects.get(username="ann"))
    rejected = vote(ann)
    review.reject_work(assignments=[rejected], reason=REASON)
    other = WorkerFactory()
    vote(other)
    assert Reference.objects.get(pk=unit.reference_id).verdict == Reference.Verdict.CORRECT
    return client, other


def test_a_rejected_vote_shows_as_rejected_with_the_reviewers_reason_escaped(rejected_then_decided_by_another):
    client, _ = rejected_then_decided_by_another
    page = client.get("/work/me/")
    html = page.content.decode()
    (row,) = page.context["rows"]
    assert (row.outcome, row.rejected, row.review_reason) == ("Rejected", True, REASON)
    assert "Agreed with the final verdict" not in html
    assert "data-rejected" in html
    assert "The reviewer’s reason: Marked &quot;Correct&quot; in two seconds" in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html and "<script>window.__xss" not in html


def test_the_tallies_keep_a_rejected_answer_apart_from_the_submitted_ones(rejected_then_decided_by_another):
    client, _ = rejected_then_decided_by_another
    (tally,) = client.get("/work/me/").context["tallies"]
    assert (tally.submitted, tally.rejected) == (0, 1)


def test_a_counted_vote_still_shows_its_agreement_with_the_verdict(rejected_then_decided_by_another):
    _, other = rejected_then_decided_by_another
    (row,) = recent_work(other)
    assert (row.outcome, row.rejected, row.review_reason) == ("Agreed with the final verdict", False, "")
    (tally,) = stage_tallies(other)
    assert (tally.submitted, tally.rejected) == (1, 0)
