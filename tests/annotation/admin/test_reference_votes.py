"""The references list's verifier tallies and its "verifiers: disagree" filter count the votes that
count (issue 36): a rejected vote is in neither, and a provisional vote only where its family's
verification stage counts provisional answers, as the worker models' frame does."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, Stage, Verification, WorkState, WorkUnit
from tests.factories import FamilyFactory, ReferenceFactory, WorkerFactory, launch

pytestmark = pytest.mark.django_db

URL = reverse("admin:annotation_reference_changelist")


def votes(reference, *answers):
    """Verification votes on `reference`, each (is_correct, work state), by workers of their own."""
    unit = WorkUnit.objects.create(stage=Stage.VERIFICATION, key=f"reference:{reference.pk}",
                                   family=reference.instance.family, reference=reference, overlap=len(answers))
    for is_correct, state in answers:
        worker = WorkerFactory()
        now = timezone.now()
        assignment = Assignment.objects.create(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED,
                                               lease_expires_at=now, submitted_at=now, work_state=state)
        Verification.objects.create(reference=reference, worker=worker, is_correct=is_correct,
                                    problem_in_response=not is_correct, assignment=assignment)


def tally(admin_client, reference):
    (row,) = [row for row in admin_client.get(URL).context["cl"].result_list if row.pk == reference.pk]
    return row.correct_votes, row.incorrect_votes


def disagreeing(admin_client):
    return {row.pk for row in admin_client.get(URL, {"verifiers": "disagree"}).context["cl"].result_list}


@pytest.fixture
def spammed():
    """Two verifiers find the reference correct; a spammer's "incorrect" was rejected."""
    reference = ReferenceFactory()
    votes(reference, (True, WorkState.PROVISIONAL), (True, WorkState.ACCEPTED), (False, WorkState.REJECTED))
    return reference


def test_a_rejected_vote_is_left_out_of_the_references_tally(admin_client, spammed):
    assert tally(admin_client, spammed) == (2, 0)
    assert "2 correct, 0 incorrect" in admin_client.get(URL).content.decode()


def test_a_rejected_vote_makes_no_reference_disagree(admin_client, spammed):
    split = ReferenceFactory()
    votes(split, (True, WorkState.ACCEPTED), (False, WorkState.PROVISIONAL))
    assert disagreeing(admin_client) == {split.pk}


def test_a_provisional_vote_counts_only_where_its_stage_counts_provisional_answers(admin_client):
    strict, lenient = FamilyFactory(name="Accepted only"), FamilyFactory(name="Provisional too")
    launch(strict, Stage.VERIFICATION, counts_provisional=False)
    launch(lenient, Stage.VERIFICATION, counts_provisional=True)
    waiting = ReferenceFactory(instance__family=strict)
    counted = ReferenceFactory(instance__family=lenient)
    for reference in (waiting, counted):
        votes(reference, (True, WorkState.ACCEPTED), (False, WorkState.PROVISIONAL))
    assert tally(admin_client, waiting) == (1, 0)
    assert tally(admin_client, counted) == (1, 1)
    assert disagreeing(admin_client) == {counted.pk}


def test_votes_without_an_assignment_count_as_they_did(admin_client):
    # A researcher's or an import's vote has no answer to review.
    reference = ReferenceFactory()
    Verification.objects.create(reference=reference, worker=WorkerFactory(), is_correct=True)
    Verification.objects.create(reference=reference, worker=WorkerFactory(), is_correct=False)
    assert tally(admin_client, reference) == (1, 1)
    assert disagreeing(admin_client) == {reference.pk}


def test_the_reference_page_says_which_of_its_votes_were_rejected(admin_client, spammed):
    page = admin_client.get(reverse("admin:annotation_reference_change", args=[spammed.pk])).content.decode()
    reviews = re.findall(r'<td class="field-review">\s*<p>([^<]*)</p>', page)
    assert sorted(reviews) == ["Accepted", "Provisional", "Rejected"]
