"""Arrival from a platform as domain functions, without a page: reading a study or HIT link, who
may act as a participant or an MTurk worker, the way back with the code, and stopping."""

from urllib.parse import parse_qsl, urlsplit

import pytest
from django.http import QueryDict

from annotation.models import Assignment, Stage, Worker, WorkUnit
from mturk import identity, links, participants
from mturk.models import CrowdStudy
from tests.factories import FamilyFactory, WorkerFactory, launch
from tests.frontend_support import caption_unit, published_hit
from tests.mturk_wire import assignment as mturk_assignment

pytestmark = pytest.mark.django_db
MTURK_ORIGIN = "https://workersandbox.mturk.com"


def study_on(platform, *, external_id="60f6acb180a7b59ac0621f9e", completion_code="C1ABCD23"):
    family = FamilyFactory()
    launch(family, Stage.CAPTION)
    return CrowdStudy.objects.create(platform=platform, stage=Stage.CAPTION, family=family,
                                     name=f"Captions on {platform}", external_id=external_id,
                                     completion_code=completion_code)


def query(**params):
    result = QueryDict(mutable=True)
    result.update(params)
    return result


def filled_in(link, **ids):
    """The study link as the platform sends a participant along it: placeholders replaced."""
    names = iter(ids.values())
    return query(**{name: next(names) for name, _ in parse_qsl(urlsplit(link).query)})


@pytest.mark.parametrize(("platform", "ids"), [
    ("prolific", {"participant": "5f1a2b3c4d5e6f7a8b9c0d1e", "study": "60f6acb180a7b59ac0621f9e",
                  "session": "64b1c2d3e4f5a6b7c8d9e0f1"}),
    ("cloudresearch", {"participant": "CR-42", "session": "ASG-7", "study": "ABCD1234"}),
])
def test_a_study_link_the_platform_filled_in_reads_back_as_who_arrived(platform, ids):
    study = study_on(platform, external_id=ids["study"])
    arrival = links.study_arrival(filled_in(links.study_link(study), **ids))
    assert arrival == links.StudyArrival(platform=platform, participant_id=ids["participant"],
                                         study_id=ids["study"], session_id=ids["session"])


def test_a_query_with_no_platform_ids_is_no_study_link():
    assert links.study_arrival(query(page="2")) is None


@pytest.mark.parametrize("params", [
    {"PROLIFIC_PID": "", "STUDY_ID": "60f6acb180a7b59ac0621f9e"},
    {"PROLIFIC_PID": "5f1a2b3c<script>", "STUDY_ID": "60f6acb180a7b59ac0621f9e"},
    {"participantId": "CR-42", "projectId": "A" * 129},
])
def test_a_study_link_missing_or_mangling_an_id_is_incomplete(params):
    with pytest.raises(links.IncompleteLink, match="incomplete"):
        links.study_arrival(query(**params))


def test_a_mangled_session_id_is_dropped_not_stored():
    arrival = links.study_arrival(query(PROLIFIC_PID="P1", STUDY_ID="S1", SESSION_ID="x y/../z"))
    assert arrival.session_id == ""


def test_completion_sends_the_participant_back_with_the_code_or_says_what_is_missing(settings):
    settings.PROLIFIC_COMPLETE_URL = "https://app.prolific.com/submissions/complete?cc={code}"
    done = links.completion(study_on("prolific"))
    assert (done.code, done.return_url, done.platform) == (
        "C1ABCD23", "https://app.prolific.com/submissions/complete?cc=C1ABCD23", "Prolific")
    uncoded = links.completion(study_on("cloudresearch", external_id="P2", completion_code=""))
    assert (uncoded.code, uncoded.return_url) == ("", "")


def arrival_of(study, participant_id, session_id=""):
    return links.StudyArrival(platform=study.platform, participant_id=participant_id,
                              study_id=study.external_id, session_id=session_id)


def test_a_new_participant_is_admitted_and_a_known_one_is_admitted_where_they_are_known():
    study = study_on("prolific")
    first = participants.admit_participant(arrival=arrival_of(study, "P1"), study=study, arrival_key="k1",
                                           known_here=lambda worker_id: False)
    again = participants.admit_participant(arrival=arrival_of(study, "P1"), study=study,
                                           known_here=lambda worker_id: worker_id == first.pk)
    assert again.pk == first.pk
    assert Worker.objects.filter(platform="prolific", external_id="P1").count() == 1


def test_a_new_participant_needs_an_arrival_key_and_their_row_keeps_it():
    study = study_on("prolific")
    with pytest.raises(participants.ArrivalKeyNeeded):
        participants.admit_participant(arrival=arrival_of(study, "P1"), study=study,
                                       known_here=lambda worker_id: False)
    assert not Worker.objects.filter(external_id="P1").exists()
    made = participants.admit_participant(arrival=arrival_of(study, "P1"), study=study, arrival_key="k1",
                                          known_here=lambda worker_id: False)
    assert made.first_arrival_key == "k1"


def test_the_key_that_made_a_row_admits_again_where_the_platform_is_not_asked_and_another_key_is_asked(
        prolific):
    study = study_on("prolific")
    made = participants.admit_participant(arrival=arrival_of(study, "P1", "sub1"), study=study,
                                          arrival_key="k1", known_here=lambda worker_id: False)
    again = participants.admit_participant(arrival=arrival_of(study, "P1", "sub1"), study=study,
                                           arrival_key="k1", known_here=lambda worker_id: False)
    assert again.pk == made.pk and prolific.requests == []
    with pytest.raises(identity.IdentityRefused):
        participants.admit_participant(arrival=arrival_of(study, "P1", "sub1"), study=study,
                                       arrival_key="k2", known_here=lambda worker_id: False)
    assert len(prolific.requests) == 1


def test_a_known_participant_elsewhere_is_admitted_only_when_prolific_confirms(prolific):
    study = study_on("prolific")
    participants.admit_participant(arrival=arrival_of(study, "P1"), study=study, arrival_key="k1",
                                   known_here=lambda worker_id: False)
    prolific.submissions["sub1"] = {"id": "sub1", "participant_id": "P1",
                                    "study_id": study.external_id, "status": "ACTIVE"}
    with pytest.raises(identity.IdentityRefused):
        participants.admit_participant(arrival=arrival_of(study, "P1", "subOTHER"), study=study,
                                       known_here=lambda worker_id: False)
    confirmed = participants.admit_participant(arrival=arrival_of(study, "P1", "sub1"), study=study,
                                               known_here=lambda worker_id: False)
    assert confirmed.external_id == "P1"


def test_a_participant_who_stops_gives_back_what_they_hold_in_that_study_only():
    study = study_on("prolific")
    worker = WorkerFactory(platform="prolific", external_id="P1")
    units = [WorkUnit.objects.create(stage=Stage.CAPTION, key=f"u{n}", family=study.family)
             for n in range(3)]

    def lease(unit, task_id, status=Assignment.Status.LEASED):
        return Assignment.objects.create(unit=unit, worker=worker, status=status,
                                         lease_expires_at=unit.created_at, platform_listing_id=task_id)

    held, elsewhere = lease(units[0], study.external_id), lease(units[1], "another-study")
    done = lease(units[2], study.external_id, Assignment.Status.SUBMITTED)
    assert participants.done_in_study(worker, study) == 1
    assert participants.stop_participating(worker=worker, study=study) == 1
    statuses = dict(Assignment.objects.values_list("pk", "status"))
    assert (statuses[held.pk], statuses[elsewhere.pk], statuses[done.pk]) == (
        Assignment.Status.RETURNED, Assignment.Status.LEASED, Assignment.Status.SUBMITTED)


def hit_query(hit, **overrides):
    params = {"hitId": hit.hit_id, "assignmentId": "3ASG0000000000000001", "workerId": "AW0001",
              "turkSubmitTo": MTURK_ORIGIN}
    return query(**{**params, **overrides})


def test_a_hit_link_reads_as_a_preview_or_an_accepted_assignment():
    unit = caption_unit()
    hit = published_hit(unit)
    preview = identity.hit_arrival(unit, query(hitId=hit.hit_id,
                                               assignmentId=identity.MTURK_PREVIEW_ASSIGNMENT))
    assert preview.preview
    accepted = identity.hit_arrival(unit, hit_query(hit))
    assert not accepted.preview
    assert (accepted.assignment_id, accepted.worker_id, accepted.submit_origin) == (
        "3ASG0000000000000001", "AW0001", MTURK_ORIGIN)


def test_a_hit_link_for_a_unit_not_published_as_that_hit_or_missing_ids_is_refused():
    unit = caption_unit()
    hit = published_hit(unit)
    other = caption_unit(photos=("astronaut",))
    with pytest.raises(identity.NotOnMTurk):
        identity.hit_arrival(other, hit_query(hit))
    with pytest.raises(identity.IncompleteHitLink):
        identity.hit_arrival(unit, hit_query(hit, turkSubmitTo="https://evil.example.org"))
    with pytest.raises(identity.IncompleteHitLink):
        identity.hit_arrival(unit, hit_query(hit, assignmentId="3ASG 1"))


def test_an_mturk_worker_is_made_at_first_load_and_a_disagreeing_claim_goes_to_mturk(mturk):
    unit = caption_unit()
    hit = published_hit(unit)
    first = identity.hit_arrival(unit, hit_query(hit))
    worker, rebind = identity.admit_mturk_worker(unit=unit, arrival=first)
    assert (worker.external_id, rebind) == ("AW0001", False)
    Assignment.objects.create(unit=unit, worker=worker, lease_expires_at=unit.created_at,
                              platform_assignment_id=first.assignment_id, platform_listing_id=hit.hit_id)
    # Somebody else's assignment id with this worker's id: MTurk says whose it is.
    claim = identity.hit_arrival(unit, hit_query(hit, assignmentId="3ASG0000000000000002"))
    mturk.expect("get_assignment", {"Assignment": mturk_assignment(
        assignment_id="3ASG0000000000000002", worker_id="AOTHER", hit_id=hit.hit_id)},
        {"AssignmentId": "3ASG0000000000000002"})
    with pytest.raises(identity.IdentityRefused, match="MTurk does not confirm"):
        identity.admit_mturk_worker(unit=unit, arrival=claim)
    mturk.done()
    assert Worker.objects.filter(platform="mturk").count() == 1
