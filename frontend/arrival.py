"""Which study participants this browser arrived as: the one thing about a participant's identity
that lives in the browser (mturk/participants.py holds the rules)."""

from axes.helpers import get_client_ip_address
from django.conf import settings
from django_ratelimit.core import _split_rate

from crowdbench import shared_cache
from mturk.participants import admit_participant

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


def study_participant(request, *, arrival, study):
    """The Worker a study link names, admitted to this browser (mturk.participants); raises
    IdentityRefused when another browser holds them and the platform does not confirm the claim,
    and TooManyNewParticipants past the throttle of new ids from one address."""
    worker = admit_participant(arrival=arrival, study=study,
                               known_here=lambda worker_id: bound_to_browser(request, worker_id),
                               may_admit_new=lambda: _may_admit_new(request, study))
    bound = _browser_participants(request)
    if bound[-1:] != [worker.pk]:
        request.browser_participants = [*[pk for pk in bound if pk != worker.pk],
                                        worker.pk][-_MAX_PARTICIPANTS:]
        request.browser_participants_changed = True
    return worker
