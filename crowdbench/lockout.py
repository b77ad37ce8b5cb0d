"""Login throttling with django-axes: whom a failure counts against, and what a locked-out client sees."""

from axes.helpers import get_client_username
from axes.models import AccessBase
from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import render


def lockout_parameters(request_or_attempt, credentials=None):
    """Count failures per user name and per address; a failure that names no user, per address only.

    A wrong API token names nobody, and counting it against "no user name" would let one client
    lock every token user out.
    """
    if isinstance(request_or_attempt, AccessBase):
        username = request_or_attempt.username
    else:
        username = get_client_username(request_or_attempt, credentials)
    return ["username", "ip_address"] if username else ["ip_address"]


def lockout_message():
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return (
        f"Too many failed sign-in attempts ({settings.AXES_FAILURE_LIMIT}) for this account or from "
        f"this address. Signing in is blocked for {minutes} minutes after the last attempt; "
        "ask an administrator if you need in sooner."
    )


def lockout_response(request, original_response=None, credentials=None):
    """django-axes' answer to a locked-out sign-in: 429 with when to try again, JSON for the API."""
    message = lockout_message()
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": message}, status=429)
    else:
        response = render(request, "locked_out.html", {"message": message}, status=429)
    response["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response
