"""Which study participants this browser arrived as: the one thing about a participant's identity
that lives in the browser (mturk/participants.py holds the rules)."""

import secrets

from axes.helpers import get_client_ip_address
from django.conf import settings
from django.core import signing
from django_ratelimit.core import _split_rate

from crowdbench import shared_cache
from mturk.identity import IdentityRefused
from mturk.participants import ArrivalKeyNeeded, admit_participant

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


def bound_to_browser(request, worker_id):
    return (worker_id in _browser_participants(request)
            or worker_id in request.session.get(_SESSION_PARTICIPANTS, []))


def remember_participants(get_response):
    """Middleware: writes the participants cookie when a request bound a new one to the browser,
    with the session cookie's attributes (Secure, SameSite for MTurk's and the platforms' pages)."""

    def middleware(request):
        response = get_response(request)
        if getattr(request, "browser_participants_changed", False):
            response.set_signed_cookie(
                PARTICIPANTS_COOKIE, ",".join(map(str, request.browser_participants)),
                salt=_PARTICIPANTS_SALT, max_age=settings.SESSION_COOKIE_AGE,
                domain=settings.SESSION_COOKIE_DOMAIN, secure=settings.SESSION_COOKIE_SECURE,
                httponly=True, samesite=settings.SESSION_COOKIE_SAMESITE,
            )
        return response

    return middleware


def _may_admit_new(request, study):
    """Another new participant id from this client's address in this study, within
    STUDY_NEW_PARTICIPANTS_RATE (django-ratelimit, on the shared cache): one person with a study
    link could otherwise open many made-up ids, hold many leases and decide majorities. While the
    cache is unreachable every new id is admitted: refusing them would stop a study for everyone."""
    return not shared_cache.throttled(request, group=f"crowdbench.study-arrivals.{study.pk}",
                              key=lambda group, request: get_client_ip_address(request) or "unknown",
                              rate=settings.STUDY_NEW_PARTICIPANTS_RATE, increment=True)


def arrivals_window_seconds():
    """The period of STUDY_NEW_PARTICIPANTS_RATE ("10/h": an hour), for a throttled page's Retry-After."""
    return _split_rate(settings.STUDY_NEW_PARTICIPANTS_RATE)[1]


# A new participant's study link is answered with a redirect to itself plus a signed arrival token
# (the browser follows it at once), and their row is made by the request that carries the token and
# keeps the token's key (mturk/participants.py). If that request's reply is lost, the browser holds
# the token in the address it was loading; reloading it lets the participant in again without the
# platform's confirmation, until STUDY_ARRIVAL_TOKEN_MAX_AGE_SECONDS. A second browser with only
# the participant id gets a token whose key is not the row's, and is refused as before.
ARRIVAL_PARAMETER = "arrival"
_ARRIVAL_SALT = "crowdbench.frontend.study-arrival"

ARRIVAL_EXPIRED = (
    "This study page was first opened too long ago to be reloaded in a browser that does not hold "
    "your place in the study. Please continue in the browser where you started; if you cannot, "
    "message the researchers through your platform. Nothing was shown or recorded here."
)
ARRIVAL_FORGED = (
    "This study link has been altered, so it cannot be opened here. Please open the study again "
    "from your platform; if this page comes back, message the researchers through your platform. "
    "Nothing was shown or recorded here."
)


class NewArrival(Exception):
    """A new participant's first request: send the browser to `location`, which carries their key."""

    def __init__(self, location):
        super().__init__(location)
        self.location = location


def _arrival_token(arrival, study):
    return signing.dumps({"s": study.pk, "p": arrival.participant_id, "k": secrets.token_urlsafe(16)},
                         salt=_ARRIVAL_SALT)


def _arrival_key(request, arrival, study):
    """(the key of this request's arrival token, or "", and why a token it carries is no good)."""
    token = request.GET.get(ARRIVAL_PARAMETER, "")
    if not token:
        return "", ""
    try:
        data = signing.loads(token, salt=_ARRIVAL_SALT, max_age=settings.STUDY_ARRIVAL_TOKEN_MAX_AGE_SECONDS)
    except signing.SignatureExpired:
        return "", ARRIVAL_EXPIRED
    except signing.BadSignature:
        return "", ARRIVAL_FORGED
    if (not isinstance(data, dict) or data.get("s") != study.pk or data.get("p") != arrival.participant_id
            or not isinstance(data.get("k"), str) or not data["k"]):
        return "", ARRIVAL_FORGED
    return data["k"], ""


def _with_new_token(request, arrival, study):
    params = request.GET.copy()
    params[ARRIVAL_PARAMETER] = _arrival_token(arrival, study)
    return f"{request.path}?{params.urlencode()}"


def study_participant(request, *, arrival, study):
    """The Worker a study link names, admitted to this browser (mturk.participants); raises
    NewArrival for a new participant's link without a good arrival token, IdentityRefused when
    another browser holds them and the platform does not confirm the claim, and
    TooManyNewParticipants past the throttle of new ids from one address."""
    key, bad_token = _arrival_key(request, arrival, study)
    try:
        worker = admit_participant(arrival=arrival, study=study, arrival_key=key,
                                   known_here=lambda worker_id: bound_to_browser(request, worker_id),
                                   may_admit_new=lambda: _may_admit_new(request, study))
    except ArrivalKeyNeeded:
        raise NewArrival(_with_new_token(request, arrival, study)) from None
    except IdentityRefused:
        # The platform did not confirm the claim either: say what was wrong with the token.
        if bad_token:
            raise IdentityRefused(bad_token) from None
        raise
    bound = _browser_participants(request)
    if bound[-1:] != [worker.pk]:
        request.browser_participants = [*[pk for pk in bound if pk != worker.pk],
                                        worker.pk][-_MAX_PARTICIPANTS:]
        request.browser_participants_changed = True
    return worker
