"""The shared cache (CACHE_URL: Redis in production), used only through here, so that its outage
degrades what used it and fails no request (issue 38: a Redis outage answered 500 to every new
participant, from the arrival throttle).

Nothing of record lives in the cache: every use holds a count that may start again or an answer
that can be asked again. So an unreachable cache is a miss that is not remembered:

- `throttled`: a throttle whose count cannot be kept lets the request in, with a warning logged;
- `get` answers the default (a remembered answer is asked again: the platform's confirmation, the
  MTurk balance, the worker ping), `set` remembers nothing;
- `kept_or_refreshed` computes the figure without the cache (the stage's median on the worker page).

What each use costs while the cache is down is in docs/operations.md ("Redis as the cache").
The cache's client library raises its own types (redis-py's, pymemcache's), and a cache is never
worth a failed request, so every error of a call to it is caught here.
"""

import logging
import time

from django.core.cache import cache, caches
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.locmem import LocMemCache
from django_ratelimit.core import is_ratelimited

logger = logging.getLogger(__name__)

# One warning a minute per use is enough to tell an operator; a warning per request during an
# outage under load would bury everything else in the log.
_WARN_EVERY_SECONDS = 60
_last_warned = {}


def _unreachable(use, error):
    now = time.monotonic()
    if now - _last_warned.get(use, -_WARN_EVERY_SECONDS) >= _WARN_EVERY_SECONDS:
        _last_warned[use] = now
        logger.warning("The shared cache is unreachable (%s: %s); %s", type(error).__name__, error, use)


def get(key, default=None):
    try:
        return cache.get(key, default)
    except Exception as error:  # noqa: BLE001 - see the module's docstring
        _unreachable("a remembered answer is asked again", error)
        return default


def set(key, value, timeout):  # noqa: A001 - the cache's own word, read as shared_cache.set
    try:
        cache.set(key, value, timeout)
    except Exception as error:  # noqa: BLE001 - see the module's docstring
        _unreachable("an answer is not remembered", error)


# A figure kept by `keep` outlives its freshness by far: a stale figure is served while a job
# computes it again, so no request waits for one after the first was kept.
KEPT_SECONDS = 7 * 24 * 3600


def keep(key, value):
    """Keep `value` under `key` for `kept_or_refreshed`, as computed now."""
    set(key, (value, time.time()), KEPT_SECONDS)
    try:
        cache.delete(f"{key}:refreshing")
    except Exception as error:  # noqa: BLE001 - see the module's docstring
        _unreachable("a refresh's mark is left to lapse", error)


def kept_or_refreshed(key, *, compute, refresh, fresh_seconds):
    """The figure kept under `key`, never waited for: past `fresh_seconds` it is served as it is
    while `refresh()` (a job that calls `keep`) computes it again, and before it was ever kept the
    answer is None while the job computes it. At most one refresh is asked for in `fresh_seconds`,
    however many requests see the figure stale. With the cache unreachable nothing can be kept, so
    `compute()` answers now; with a cache of this process's own (the embedded default's memory) a
    job's figure would be kept where no web process sees it, so it is computed and kept here."""
    missing = object()
    try:
        found = cache.get(key, missing)
    except Exception as error:  # noqa: BLE001 - see the module's docstring
        _unreachable("a kept figure is computed in the request", error)
        return compute()
    if not _shared_between_processes():
        if found is missing or time.time() - found[1] > fresh_seconds:
            found = (compute(), time.time())
            set(key, found, KEPT_SECONDS)
        return found[0]
    if found is missing or time.time() - found[1] > fresh_seconds:
        try:
            asked = cache.add(f"{key}:refreshing", True, fresh_seconds)
        except Exception as error:  # noqa: BLE001 - see the module's docstring
            _unreachable("a kept figure is not refreshed", error)
            asked = False
        if asked:
            refresh()
    return None if found is missing else found[0]


def _shared_between_processes():
    # `cache` is a proxy; the backend it stands for is the configured one.
    return not isinstance(caches["default"], (LocMemCache, DummyCache))


def throttled(key, *, group, rate):
    """Whether one more use by `key` (a client's address, say) in `group` goes past `rate`, counted
    by django-ratelimit (its `is_ratelimited`, the use counted); False, admitting it, when the cache
    that keeps the count is unreachable.

    The caller hands over the key itself rather than the request it came from, so that the layer
    that decides to count (a new study participant, mturk/participants.py) needs no web request:
    django-ratelimit gives its `request` argument only to a key function, and to nothing else when
    every method counts."""
    try:
        return is_ratelimited(key, group=group, key=lambda _group, counted: counted, rate=rate, increment=True)
    except Exception as error:  # noqa: BLE001 - see the module's docstring
        _unreachable(f"the throttle {group} admits without counting", error)
        return False
