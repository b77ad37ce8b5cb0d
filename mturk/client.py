"""The MTurk requester API through boto3: sandbox or production by setting, retried by botocore.

botocore's standard retry mode retries what MTurk asks to be tried again: ThrottlingException, and
ServiceFault (a server fault: HTTP 5xx), with its own capped, jittered exponential backoff, up to
MTURK_MAX_ATTEMPTS attempts in all. A retry resends the same parameters, so a paid call's
UniqueRequestToken makes it safe. RequestError is our fault and surfaces at once as
PlatformRequestError. botocore's Stubber answers before the retry loop, so tests of retries talk to
a loopback endpoint instead (tests/mturk_wire.py).
"""

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    HTTPClientError,
    NoCredentialsError,
)
from django.conf import settings

from mturk import calls, model_check
from mturk.exceptions import PlatformError, PlatformRequestError
from mturk.models import Environment

PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
# What is still failing once botocore has retried it: MTurk (or the network) did not answer.
UNANSWERED_CODES = {"ServiceFault", "ThrottlingException", "Throttling", "ServiceUnavailable"}
CREDENTIAL_SETTINGS = ("MTURK_ACCESS_KEY_ID", "MTURK_SECRET_ACCESS_KEY")
CREDENTIALS_HINT = ("Set MTURK_ACCESS_KEY_ID and MTURK_SECRET_ACCESS_KEY (or AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY, or an AWS profile) to the requester account's keys.")

_clients = {}


def environment():
    return Environment.SANDBOX if settings.MTURK_SANDBOX else Environment.PRODUCTION


def endpoint_url():
    if settings.MTURK_ENDPOINT_URL:
        return settings.MTURK_ENDPOINT_URL
    return SANDBOX_ENDPOINT if settings.MTURK_SANDBOX else PRODUCTION_ENDPOINT


def get_client():
    """One boto3 client per endpoint, credentials from boto3's usual chain (or MTURK_* settings).
    MTURK_MAX_ATTEMPTS counts the first attempt (botocore's total_max_attempts)."""
    url = endpoint_url()
    if url not in _clients:
        credentials = {}
        if settings.MTURK_ACCESS_KEY_ID:
            credentials = {"aws_access_key_id": settings.MTURK_ACCESS_KEY_ID,
                           "aws_secret_access_key": settings.MTURK_SECRET_ACCESS_KEY}
        client = boto3.client(
            "mturk", region_name="us-east-1", endpoint_url=url,
            config=Config(retries={"mode": "standard",
                                   "total_max_attempts": max(1, settings.MTURK_MAX_ATTEMPTS)},
                          connect_timeout=10, read_timeout=30),
            **credentials,
        )
        _clients[url] = model_check.install(client)
    return _clients[url]


def credentials_found():
    """Whether boto3 finds MTurk credentials here: MTURK_* settings, or its usual chain
    (environment, shared files, an instance role). Looked up once per client, as boto3 does."""
    if settings.MTURK_ACCESS_KEY_ID and settings.MTURK_SECRET_ACCESS_KEY:
        return True
    key = ("credentials", endpoint_url())
    if key not in _clients:
        _clients[key] = boto3.session.Session().get_credentials() is not None
    return _clients[key]


def call(operation, **params):
    """Call one MTurk operation (boto3's snake_case name); botocore retries it. Returns the response.

    Every call is reported to mturk.calls, answered or not, with the attempts botocore made, so
    the step that made it can audit it.
    """
    client = get_client()
    name = client.meta.method_to_api_mapping.get(operation, operation)
    try:
        response = _call(client, operation, params)
    except PlatformError as error:
        calls.report(platform="MTurk", operation=name, request=params, error=str(error),
                     response=getattr(error, "response", None) or None,
                     sent=getattr(error, "sent", True), attempts=getattr(error, "attempts", 1))
        raise
    calls.report(platform="MTurk", operation=name, request=params,
                 response={k: v for k, v in response.items() if k != "ResponseMetadata"},
                 attempts=_attempts(response))
    return response


def _attempts(response):
    return 1 + response.get("ResponseMetadata", {}).get("RetryAttempts", 0)


def _call(client, operation, params):
    try:
        return getattr(client, operation)(**params)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        message = error.response.get("Error", {}).get("Message", "") or str(error)
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        attempts = _attempts(error.response)
        if code in UNANSWERED_CODES or status >= 500:
            failure = PlatformError(
                f"MTurk did not answer {operation} after {attempts} attempt{'s' * (attempts != 1)} "
                f"({code}: {message}).")
        else:
            failure = PlatformRequestError(f"MTurk refused {operation}: {message}", code=code,
                                           response=error.response)
        failure.attempts = attempts
        raise failure from error
    except (ConnectionError, HTTPClientError) as error:
        raise PlatformError(f"MTurk could not be reached for {operation}: {error}") from error
    except NoCredentialsError as error:
        # botocore looks for credentials only when it signs the first request, so a site
        # without them finds out here; the request never left.
        raise PlatformError(
            f"MTurk was not called ({operation}): no AWS credentials were found ({error}). "
            f"{CREDENTIALS_HINT}", sent=False) from error
    except BotoCoreError as error:
        raise PlatformError(f"MTurk call {operation} failed: {error}", sent=False) from error


def account_balance():
    """(environment, available balance as a string) for the admin banner."""
    response = call("get_account_balance")
    return response.get("AvailableBalance", "")


def get_sqs_client():
    """The SQS queue MTurk notifications are delivered to (optional)."""
    key = ("sqs", settings.MTURK_SQS_QUEUE_URL)
    if key not in _clients:
        _clients[key] = boto3.client("sqs", region_name=settings.MTURK_SQS_REGION)
    return _clients[key]
