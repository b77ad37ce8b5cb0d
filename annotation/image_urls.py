"""Image links typed by workers and researchers, read the way a browser would read them.

A link a worker gives is shown to other workers and to researchers, so the host it names must be
the host a browser would contact. Python's `urlsplit` and a browser disagree on exactly the
tricky cases (a backslash is a slash to a browser, so `https://evil.example\\@upload.wikimedia.org/`
loads evil.example; tabs and newlines are dropped; `%75pload` and full-width letters in a host are
decoded; `2852039166` and `0xA9.0xFE.0xA9.0xFE` are IPv4 addresses), so rather than imitate every
rule, a link is refused whenever the two could disagree: it may hold no whitespace, control or
formatting characters, no backslash, no user name or password, no percent sign or non-ASCII letter
in its host, no port other than the scheme's own, and its host must be a plain DNS name, never an
IP address in any spelling. What remains reads the same in both, and its host is the one compared
with the researcher's allow-list (IMAGE_URL_ALLOWED_HOSTS).
"""

import ipaddress
import re
import unicodedata
from urllib.parse import urlsplit

from django.conf import settings

from annotation.exceptions import AnnotationError

MAX_LENGTH = 1000  # ImageAsset.url
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
# A browser reads a host whose last label is a number (decimal, octal or hex) as an IPv4 address.
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
# Whitespace, controls, invisible formatting (bidi overrides, zero-width) and line separators.
_HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Zs", "Zl", "Zp"}


def image_url_problem(url):
    """Why a browser could read this link differently from us, or load something unsafe; None if sound.

    Accepts http and https links (a researcher may store either); whether a page may show the image
    is `image_url_allowed`.
    """
    if not isinstance(url, str) or not url:
        return "it is empty"
    if len(url) > MAX_LENGTH:
        return f"it is longer than {MAX_LENGTH} characters"
    if "\\" in url or any(unicodedata.category(char) in _HIDDEN_CATEGORIES for char in url):
        return "it holds spaces, control characters or a backslash"
    parts = urlsplit(url)
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        return "it is not a web address (https://...)"
    if not url[len(parts.scheme):].startswith("://"):
        return "it is not a web address (https://...)"
    netloc = parts.netloc
    if "@" in netloc:
        return "it holds a user name or password before the host"
    if not netloc.isascii() or "%" in netloc:
        return "its host holds encoded or non-ASCII characters; give the host as plain letters"
    if netloc.startswith("["):
        return "its host is an IP address; give the image's address by its domain name"
    try:
        port = parts.port
    except ValueError:
        return "its port is not a number"
    if port is not None and port != _DEFAULT_PORTS[parts.scheme.lower()]:
        return "it names a port; give the address without one"
    host = parts.hostname or ""
    labels = host.split(".")
    if _is_ip_address(host) or _NUMERIC_LABEL.match(labels[-1]):
        return "its host is an IP address; give the image's address by its domain name"
    if len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
        return "its host is not a domain name"
    return None


def check_image_url(url):
    """Raise AnnotationError, with a message for whoever typed it, when `image_url_problem` finds one."""
    problem = image_url_problem(url)
    if problem is not None:
        raise AnnotationError(f"This image link cannot be used: {problem}.")


def image_url_allowed(url):
    """Whether a page may make a browser load this link: sound, HTTPS, on a host of the allow-list."""
    if image_url_problem(url) is not None:
        return False
    parts = urlsplit(url)
    allowed = {host.lower() for host in settings.IMAGE_URL_ALLOWED_HOSTS}
    return parts.scheme.lower() == "https" and parts.hostname in allowed


def _is_ip_address(host):
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
