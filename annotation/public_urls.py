"""The one place that turns a path on this site into an address other people follow: exported
image_url values, the Prolific / Connect study link, the URL an MTurk HIT points at.

PUBLIC_BASE_URL, when set, is that address. When it is not set, a link shown in a researcher's
browser uses the address the researcher is using (request.build_absolute_uri), which is right for
them; a link that leaves without a request (a snapshot built in the background, a HIT) has no
address to use, so it stays a site-relative path, and the admin warns before a snapshot, a HIT
or a study would carry it (``placeholder_warning``). No address is ever invented: a made-up
default such as https://127.0.0.1:8000 has the wrong scheme and port for `make run` and means
nothing to anybody else.
"""

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings

SETTING = "PUBLIC_BASE_URL"
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "testserver"}


def base_url():
    return settings.PUBLIC_BASE_URL.strip().rstrip("/")


def public_url(path, *, request=None):
    """``path`` (a site path such as /work/caption/ or /media/...) as an address to give out."""
    if "://" in path:
        return path
    if base_url():
        return base_url() + path
    if request is not None:
        return request.build_absolute_uri(path)
    return path


def _is_local(host):
    if not host or host in _LOCAL_NAMES or host.endswith((".local", ".localhost", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local or address.is_unspecified


def placeholder_warning(what):
    """A message for the admin when ``what`` (e.g. "this snapshot's image URLs") would not carry
    an address that workers or dataset users can reach; None when PUBLIC_BASE_URL is one."""
    base = base_url()
    if not base:
        return (f"PUBLIC_BASE_URL is not set, so {what} would carry site-relative paths (/media/..., /work/...) "
                "that nobody outside this browser can follow. Set PUBLIC_BASE_URL to the site's public "
                "https:// address first.")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or _is_local(parts.hostname):
        return (f"PUBLIC_BASE_URL is {base}, a local address: {what} would point there, which workers and "
                "dataset users cannot reach. Set it to the site's public https:// address.")
    return None
