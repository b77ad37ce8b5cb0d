"""Which study participants this browser arrived as: the one thing about a participant's identity
that lives in the browser (mturk/participants.py holds the rules)."""

import secrets

from axes.helpers import get_client_ip_address
from django.conf import settings
from django.core import signing

from mturk.participants import (
    ARRIVAL_ELSEWHERE,
    ARRIVAL_EXPIRED,
    ARRIVAL_FORGED,
    ArrivalKeyNeeded,
    ArrivalToken,
    admit_arrival,
)

# Seconds without input after which the active-time clock stops (frontend/static/.../annotator.js).
IDLE_SECONDS = 60
MAX_ACTIVE_SECONDS = 24 * 3600


# The study participants this browser arrived as (ids of Worker rows), in a cookie signed with
# the site's secret key: as hard to forge as a session, and read without a database query on
# every next-unit request. Capped, so a shared browser cannot grow it without bound.
PARTICIPANTS_COOKIE = "crowdbench_participants"
_PARTICIPANTS_SALT = "crowdbench.participants"
_MAX_PARTICIPANTS = 20


def _browser_participants(request):
    if not hasattr(request, "browser_participants"):
        signed = request.get_signed_cookie(PARTICIPANTS_COOKIE, default="", salt=_PARTICIPANTS_SALT,
                                           max_age=settings.SESSION_COOKIE_AGE)
        request.browser_participants = [int(pk) for pk in signed.split(",") if pk.isdigit()]
    return request.browser_participants


# Where the binding was kept before the cookie: browsers mid-study when a site upgrades keep theirs.
_SESSION_PARTICIPANTS = "crowdbench.participants"


def known_participants(request):
    """The ids of the study participants this browser was admitted as."""
    return frozenset(_browser_participants(request)) | frozenset(request.session.get(_SESSION_PARTICIPANTS, []))


def bound_to_browser(request, worker_id):
    return worker_id in known_participants(request)


def bind_to_browser(request, worker_id):
    """This browser now holds the participant `worker_id`: the middleware below keeps it."""
    bound = _browser_participants(request)
    if bound[-1:] != [worker_id]:
        request.browser_participants = [*[pk for pk in bound if pk != worker_id], worker_id][-_MAX_PARTICIPANTS:]
        request.browser_participants_changed = True


def remember_participants(get_response):
    """Middleware: writes the participants cookie when a request bound a new one to the browser, and
    the arrivals cookie when it gave the browser an arrival token, with the session cookie's
    attributes (Secure, SameSite for MTurk's and the platforms' pages)."""

    def middleware(request):
        response = get_response(request)
        kept = {"domain": settings.SESSION_COOKIE_DOMAIN, "secure": settings.SESSION_COOKIE_SECURE, "httponly": True,
                "samesite": settings.SESSION_COOKIE_SAMESITE}
        if getattr(request, "browser_participants_changed", False):
            response.set_signed_cookie(PARTICIPANTS_COOKIE, ",".join(map(str, request.browser_participants)),
                                       salt=_PARTICIPANTS_SALT, max_age=settings.SESSION_COOKIE_AGE, **kept)
        if getattr(request, "arrival_keys_changed", False):
            response.set_signed_cookie(ARRIVALS_COOKIE, ",".join(request.arrival_keys), salt=_ARRIVALS_SALT,
                                       max_age=settings.STUDY_ARRIVAL_TOKEN_MAX_AGE_SECONDS, **kept)
        return response

    return middleware


def client_address(request):
    """The address new study participants are counted by (mturk.participants throttles them), as
    django-axes reads it for sign-ins: the same proxy settings, the same client."""
    return get_client_ip_address(request) or "unknown"


# A new participant's study link is answered with a redirect to itself plus a signed arrival token
# (the browser follows it at once), and their row is made by the request that carries the token and
# keeps the token's key (mturk/participants.py). If that request's reply is lost, the browser holds
# the token in the address it was loading; reloading it lets the participant in again without the
# platform's confirmation, until STUDY_ARRIVAL_TOKEN_MAX_AGE_SECONDS. A second browser with only
# the participant id gets a token whose key is not the row's, and is refused as before.
ARRIVAL_PARAMETER = "arrival"
_ARRIVAL_SALT = "crowdbench.frontend.study-arrival"
# The keys of the last arrival tokens given to this browser, in a signed cookie set by the redirect
# that gives one: a token is good only in the browser it was given to. An address is easily passed
# on (copied, shared, read over a shoulder), and with the token alone a second browser was let in
# as the participant, their work and their completion code with them; the cookie stays behind.
ARRIVALS_COOKIE = "crowdbench_arrivals"
_ARRIVALS_SALT = "crowdbench.frontend.arrivals"
_MAX_ARRIVALS = 5


def _arrival_keys(request):
    if not hasattr(request, "arrival_keys"):
        signed = request.get_signed_cookie(ARRIVALS_COOKIE, default="", salt=_ARRIVALS_SALT,
                                           max_age=settings.STUDY_ARRIVAL_TOKEN_MAX_AGE_SECONDS)
        request.arrival_keys = [key for key in signed.split(",") if key]
    return request.arrival_keys

class NewArrival(Exception):
    """A new participant's first request: send the browser to `location`, which carries their key."""

    def __init__(self, location):
        super().__init__(location)
        self.location = location


def _arrival_token(request, arrival, study):
    key = secrets.token_urlsafe(16)
    request.arrival_keys = [*_arrival_keys(request), key][-_MAX_ARRIVALS:]
    request.arrival_keys_changed = True
    return signing.dumps({"s": study.pk, "p": arrival.participant_id, "k": key}, salt=_ARRIVAL_SALT)


def arrival_token(request):
    """The ArrivalToken this request carries: empty without one (mturk.participants checks it
    against the study and the participant it is used for)."""
    token = request.GET.get(ARRIVAL_PARAMETER, "")
    if not token:
        return ArrivalToken()
    try:
        data = signing.loads(token, salt=_ARRIVAL_SALT, max_age=settings.STUDY_ARRIVAL_TOKEN_MAX_AGE_SECONDS)
    except signing.SignatureExpired:
        return ArrivalToken(problem=ARRIVAL_EXPIRED)
    except signing.BadSignature:
        return ArrivalToken(problem=ARRIVAL_FORGED)
    if not isinstance(data, dict) or not isinstance(data.get("k"), str) or not data["k"]:
        return ArrivalToken(problem=ARRIVAL_FORGED)
    named = {"study_id": data.get("s"), "participant_id": data.get("p")}
    if data["k"] not in _arrival_keys(request):
        return ArrivalToken(**named, problem=ARRIVAL_ELSEWHERE)
    return ArrivalToken(**named, key=data["k"])


def with_new_token(request, arrival, study):
    params = request.GET.copy()
    params[ARRIVAL_PARAMETER] = _arrival_token(request, arrival, study)
    return f"{request.path}?{params.urlencode()}"


def study_participant(request, *, arrival, study):
    """The Worker a study link names, admitted to this browser (mturk.participants); raises
    NewArrival for a new participant's link without a good arrival token, IdentityRefused when
    another browser holds them and the platform does not confirm the claim, and
    TooManyNewParticipants past the throttle of new ids from one address."""
    try:
        worker = admit_arrival(arrival=arrival, study=study, arrival_token=arrival_token(request),
                               known_here=known_participants(request), client_address=client_address(request))
    except ArrivalKeyNeeded:
        raise NewArrival(with_new_token(request, arrival, study)) from None
    bind_to_browser(request, worker.pk)
    return worker
