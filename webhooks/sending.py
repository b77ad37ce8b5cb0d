"""Sending a delivery: a signed POST to an endpoint, or an e-mail to the researchers; one attempt at
a time, with waits that double between attempts (WEBHOOK_RETRY_BASE_SECONDS, up to
WEBHOOK_RETRY_MAX_SECONDS) until WEBHOOK_MAX_ATTEMPTS are spent.

The signature follows Stripe's scheme: HMAC-SHA256 with the endpoint's secret over
`<timestamp>.<body>`, sent as `X-Crowdbench-Signature: t=<timestamp>,v1=<hex digest>`, so a
receiver can refuse an old message replayed as well as a forged one (docs/webhooks.md).
"""

import hashlib
import hmac
import json
import time
from datetime import timedelta
from http import HTTPStatus

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from crowdbench import outbound
from crowdbench.events import EVENTS
from crowdbench.jobs import enqueue
from webhooks.models import Delivery

SIGNATURE_HEADER = "X-Crowdbench-Signature"
EVENT_ID_HEADER = "X-Crowdbench-Event-Id"
EVENT_HEADER = "X-Crowdbench-Event"
_ERROR_CHARS = 2000
DELIVER_JOB = "webhooks.deliver"


def email_recipients():
    return list(settings.NOTIFY_EMAILS) or [address for _, address in settings.ADMINS]


def signature(*, secret, timestamp, body):
    """The hex HMAC-SHA256 of `<timestamp>.<body>` (body as the bytes sent)."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def encoded(payload):
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


def backoff_seconds(attempts):
    """The wait after `attempts` failed attempts: the base, doubled each time, capped."""
    return min(settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempts - 1), settings.WEBHOOK_RETRY_MAX_SECONDS)


class DeliveryError(Exception):
    """This attempt failed; the message says why, for the delivery log."""


def _post(delivery):
    endpoint = delivery.endpoint
    content, timestamp = encoded(delivery.payload), int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "crowdbench-webhooks/1",
        EVENT_HEADER: delivery.event,
        EVENT_ID_HEADER: str(delivery.event_id),
        SIGNATURE_HEADER: f"t={timestamp},v1={signature(secret=endpoint.secret, timestamp=timestamp, body=content)}",
    }
    try:
        # Redirects are not followed: the signature was made for the URL the researcher gave, and a
        # redirect could lead where the address check never looked.
        with outbound.client(setting="WEBHOOK_ALLOWED_NETWORKS", timeout=settings.WEBHOOK_TIMEOUT_SECONDS) as http, \
                http.stream("POST", endpoint.url, content=content, headers=headers) as response:
            # The body is never read: an internal service's answer must not reach the delivery log.
            delivery.response_status = response.status_code
    except (httpx.InvalidURL, UnicodeError) as error:
        # A host name that is no internet name (an A-label idna refuses, "xn--zz") fails as httpx
        # builds the request, with idna's own error: a failed attempt, never a job that fails forever.
        raise DeliveryError(f"Invalid URL: {error}") from error
    except httpx.HTTPError as error:
        refused = outbound.refusal(error)
        raise DeliveryError(f"Refused: {refused}" if refused else f"{type(error).__name__}: {error}") from error
    if not 200 <= delivery.response_status < 300:
        raise DeliveryError(f"HTTP {delivery.response_status} {_phrase(delivery.response_status)}".rstrip())


def _phrase(status):
    # The standard phrase, not the receiver's: what the log says is ours, never the answer's.
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def email_text(payload):
    """Subject and body of the researchers' e-mail about an event."""
    scope = payload.get("scope") or {}
    subject = EVENTS[payload["type"]] + (f": {scope['name']}" if scope else "")
    lines = [f"{subject}.", ""]
    lines += [f"{name.replace('_', ' ')}: {value}" for name, value in payload["data"].items()]
    lines += ["", f"Event {payload['id']} ({payload['type']}) at {payload['created_at']}."]
    return f"[crowdbench] {subject}", "\n".join(lines)


def _mail(delivery):
    recipients = email_recipients()
    if not recipients:
        raise DeliveryError("NOTIFY_EMAILS names nobody to tell.")
    subject, text = email_text(delivery.payload)
    try:
        send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, recipients, fail_silently=False)
    except OSError as error:  # smtplib's errors and refused or lost connections alike
        raise DeliveryError(f"{type(error).__name__}: {error}") from error


def attempt(*, delivery_id):
    """Try a pending delivery once when it is due. Returns the seconds to wait before the next
    attempt, or None when there is nothing more to do (delivered, attempts spent, or gone).

    The caller holds the delivery's lease (webhooks/tasks.py), so two copies never send at once."""
    delivery = Delivery.objects.select_related("endpoint").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != Delivery.Status.PENDING:
        return None
    wait = (delivery.next_attempt_at - timezone.now()).total_seconds()
    if wait > 0:
        return wait
    delivery.attempts += 1
    try:
        if delivery.channel == Delivery.Channel.WEBHOOK:
            _post(delivery)
        else:
            _mail(delivery)
    except DeliveryError as error:
        delivery.last_error = f"Attempt {delivery.attempts}: {error}"[:_ERROR_CHARS]
        if delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
            delivery.status = Delivery.Status.FAILED
            wait = None
        else:
            wait = backoff_seconds(delivery.attempts)
            delivery.next_attempt_at = timezone.now() + timedelta(seconds=wait)
    else:
        delivery.status, delivery.delivered_at, wait = Delivery.Status.DELIVERED, timezone.now(), None
    delivery.save(update_fields=["attempts", "status", "last_error", "response_status", "next_attempt_at",
                                 "delivered_at", "updated_at"])
    return wait


def send_again(*, deliveries):
    """Send these deliveries again from their first attempt (a receiver that was down, a fixed
    URL); one already delivered goes again with the same event id, which the receiver may drop.
    Returns how many were queued."""
    with transaction.atomic():
        ids = list(deliveries.values_list("pk", flat=True))
        Delivery.objects.filter(pk__in=ids).update(status=Delivery.Status.PENDING, attempts=0,
                                                   next_attempt_at=timezone.now(), delivered_at=None,
                                                   updated_at=timezone.now())
        for pk in ids:
            enqueue(DELIVER_JOB, pk)
    return len(ids)
