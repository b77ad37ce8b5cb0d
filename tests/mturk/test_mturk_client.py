"""MTurk calls retried by botocore (against a loopback endpoint, since the Stubber skips
botocore's retries) and the model checker the Stubber does not give us."""

import pytest

from mturk import calls, model_check
from mturk import client as mturk_client
from mturk.exceptions import PlatformError, PlatformRequestError
from tests.mturk_wire import MTurkEndpoint


@pytest.fixture
def endpoint(settings, monkeypatch):
    server = MTurkEndpoint(settings, monkeypatch)
    yield server
    server.stop()


def test_checker_finds_bad_enum_pattern_and_borrowed_pattern(mturk):
    model = mturk.client.meta.service_model
    found = model_check.problems(model, "CreateHITType", {
        "Title": "t", "Description": "d", "Reward": "0.505", "AssignmentDurationInSeconds": 60,
        "QualificationRequirements": [
            {"QualificationTypeId": "not-an-id", "Comparator": "AtLeast", "IntegerValues": [1]},
        ],
    })
    assert any("Reward='0.505'" in p for p in found)
    assert any("Comparator='AtLeast'" in p for p in found)
    # A QualificationRequirement's id has no pattern of its own; it borrows EntityId's.
    assert any("QualificationTypeId='not-an-id'" in p for p in found)


def test_checker_finds_maximums(mturk):
    model = mturk.client.meta.service_model
    found = model_check.problems(model, "ListAssignmentsForHIT",
                                 {"HITId": "3ABC", "MaxResults": 500})
    assert found == ["ListAssignmentsForHIT.MaxResults=500 is above 100"]


def test_checker_passes_a_good_request(mturk):
    model = mturk.client.meta.service_model
    assert model_check.problems(model, "SendBonus", {
        "WorkerId": "A1EXAMPLE", "BonusAmount": "0.50", "AssignmentId": "3EXAMPLE",
        "Reason": "thanks", "UniqueRequestToken": "crowdbench-bonus-1"}) == []


def test_every_request_is_checked_before_it_leaves(mturk):
    with pytest.raises(PlatformRequestError, match="Comparator"):
        mturk_client.call("create_hit_type", Title="t", Description="d", Reward="0.50",
                          AssignmentDurationInSeconds=60, QualificationRequirements=[
                              {"QualificationTypeId": "00000000000000000071",
                               "Comparator": "Near", "LocaleValues": [{"Country": "US"}]}])
    mturk.done()  # nothing was sent, so no stubbed answer was needed


def test_throttling_and_service_fault_are_retried_by_botocore(endpoint):
    endpoint.fail("ThrottlingException", "Rate exceeded")
    endpoint.fail("ServiceFault", "try again", status=500)
    endpoint.answer({"AvailableBalance": "10000.00"})
    with calls.collect() as made:
        assert mturk_client.account_balance() == "10000.00"
    assert endpoint.operations() == ["GetAccountBalance"] * 3
    # One call in the audit, saying it took three attempts.
    assert [call.as_answer() for call in made] == [
        {"operation": "GetAccountBalance", "response": {"AvailableBalance": "10000.00"}, "attempts": 3}]


def test_retries_stop_at_the_configured_number_of_attempts(endpoint, settings):
    settings.MTURK_MAX_ATTEMPTS = 3
    mturk_client._clients.clear()
    for _ in range(4):
        endpoint.fail("ServiceUnavailable", "Service unavailable", status=503)
    with calls.collect() as made, pytest.raises(PlatformError, match="after 3 attempts"):
        mturk_client.account_balance()
    assert endpoint.operations() == ["GetAccountBalance"] * 3
    assert made[0].attempts == 3 and made[0].sent


def test_a_retried_bonus_carries_the_same_unique_request_token(endpoint):
    endpoint.fail("ServiceFault", "try again", status=500)
    endpoint.answer({})
    mturk_client.call("send_bonus", WorkerId="A1EXAMPLE", BonusAmount="0.50", AssignmentId="3EXAMPLE",
                      Reason="thanks", UniqueRequestToken="crowdbench-bonus-7")
    assert [params["UniqueRequestToken"] for _, params in endpoint.requests] == ["crowdbench-bonus-7"] * 2


def test_request_error_is_sent_once_at_the_wire(endpoint):
    endpoint.fail("RequestError", "Assignment 3XYZ does not exist.")
    with pytest.raises(PlatformRequestError, match="Assignment 3XYZ does not exist"):
        mturk_client.call("get_assignment", AssignmentId="3XYZ")
    assert endpoint.operations() == ["GetAssignment"]


def test_request_error_is_not_retried_and_says_what_mturk_said(mturk):
    mturk.fail("get_assignment", "RequestError", "Assignment 3XYZ does not exist.")
    with pytest.raises(PlatformRequestError, match="MTurk refused get_assignment: Assignment 3XYZ"):
        mturk_client.call("get_assignment", AssignmentId="3XYZ")
    assert mturk.operations() == ["GetAssignment"]
    mturk.done()


def test_sandbox_by_default_and_production_by_setting(settings):
    settings.MTURK_ENDPOINT_URL = ""
    settings.MTURK_SANDBOX = True
    assert mturk_client.endpoint_url() == "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
    settings.MTURK_SANDBOX = False
    assert mturk_client.endpoint_url() == "https://mturk-requester.us-east-1.amazonaws.com"
    assert mturk_client.environment() == "production"
