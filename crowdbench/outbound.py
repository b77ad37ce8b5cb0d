"""Requests to addresses a researcher typed (webhook URLs, a tournament's endpoint models) reach the
public internet only: never this machine, its private network or a cloud's metadata service, unless
a setting names the networks allowed (WEBHOOK_ALLOWED_NETWORKS, ENDPOINT_MODEL_ALLOWED_NETWORKS).

The name is resolved once, as the connection is opened, and the connection goes to the address that
was checked: a second lookup between check and connect would let a name that changes its answer
(DNS rebinding) pass the check with a public address and connect to an internal one. The request
keeps the name for its Host header and TLS (SNI and the certificate check), and no proxy from the
environment is used, since a proxy would make the connection the check did not see.

Every spelling of an address (decimal `2130706433`, octal `0177.0.0.1`, IPv4-mapped IPv6) is checked
as the resolver reads it, so no spelling escapes the check.
"""

import ipaddress
import socket
from urllib.parse import urlsplit

import httpcore
import httpx
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.deconstruct import deconstructible


class AddressRefused(httpcore.ConnectError):
    """The name resolves to no address the setting allows; httpx raises it as a ConnectError made
    from this one (`refusal` finds it)."""


def allowed_networks(setting):
    return [ipaddress.ip_network(network.strip(), strict=False)
            for network in getattr(settings, setting) if network.strip()]


def _kind(address):
    """What makes `address` internal ("loopback", ...), or None for a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        # An IPv4 address carried inside an IPv6 one (mapped, 6to4, Teredo's client) is judged as
        # itself: 2002:7f00:1:: is 127.0.0.1 for a host with a 6to4 relay.
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo or (None, None))[1]
        if embedded is not None:
            inner = _kind(embedded)
            if inner is not None:
                return inner
    # The narrowest name first: the private ranges include loopback and link-local.
    for kind in ("loopback", "link_local", "multicast", "unspecified", "reserved", "private"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    # Shared address space (100.64.0.0/10), 6to4 and the like: not private, but not the internet either.
    return None if address.is_global else "internal"


def _resolved(host, port):
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise httpcore.ConnectError(f"{host} cannot be resolved: {error}") from error
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))


def checked_addresses(host, port, *, setting):
    """The addresses of `host` that a request may connect to, in the resolver's order; raises
    AddressRefused when there are none."""
    networks = allowed_networks(setting)
    addresses = _resolved(host, port)
    allowed, refused = [], []
    for address in addresses:
        kind = _kind(address)
        if kind is None or any(address in network for network in networks):
            allowed.append(address)
        else:
            refused.append((address, kind))
    if not allowed:
        address, kind = refused[0]
        shown = "" if str(address) == host else f" resolves to {address}, which"
        raise AddressRefused(f"{host}{shown} is a {kind} address; only public addresses are reached "
                             f"unless {setting} names the network.")
    return allowed


class _CheckedBackend(httpcore.SyncBackend):
    def __init__(self, setting):
        self._setting = setting

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        addresses = checked_addresses(host, port, setting=self._setting)

        def connect(address):
            return super(_CheckedBackend, self).connect_tcp(str(address), port, timeout=timeout,
                                                            local_address=local_address,
                                                            socket_options=socket_options)

        # As socket.create_connection does with a name: the next address when one cannot be reached.
        for address in addresses[:-1]:
            try:
                return connect(address)
            except (httpcore.ConnectError, httpcore.ConnectTimeout):
                continue
        return connect(addresses[-1])


class CheckedTransport(httpx.HTTPTransport):
    """httpx's transport, connecting only to addresses `setting` allows."""

    def __init__(self, *, setting, **options):
        super().__init__(trust_env=False, **options)
        # httpx offers no door for a network backend; its connection pool (httpcore's) reads this one.
        self._pool._network_backend = _CheckedBackend(setting)


def client(*, setting, **options):
    """An httpx client that connects only to addresses `setting` allows and follows no redirect."""
    return httpx.Client(transport=CheckedTransport(setting=setting), follow_redirects=False, trust_env=False,
                        **options)


def refusal(error):
    """The AddressRefused behind an error (httpx's ConnectError, or a client library's error made
    from one), or None."""
    while error is not None and not isinstance(error, AddressRefused):
        error = error.__cause__ or error.__context__
    return error


@deconstructible
class PublicAddressValidator:
    """Refuses, when it is registered, a URL whose host is or resolves to an internal address. A name
    that does not resolve yet passes: the check that guards is the one made at each request."""

    def __init__(self, setting):
        self.setting = setting

    def __call__(self, url):
        try:
            parts = urlsplit(url or "")
            host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
            # Read as a request is built from it: a host name that is no internet name ("xn--zz")
            # is refused here, not by every delivery after.
            host = httpx.URL(url or "").host or host
        except (ValueError, httpx.InvalidURL):
            raise ValidationError("Enter a valid URL: its host or port cannot be read.", code="invalid") from None
        if parts.port == 0:
            raise ValidationError("Enter a valid URL: port 0 reaches nothing.", code="invalid")
        if parts.username is not None or parts.password is not None:
            raise ValidationError("Leave the user name and password out of the URL: they would be sent and logged "
                                  "with every request.", code="credentials")
        if not host:
            return
        try:
            checked_addresses(host, port, setting=self.setting)
        except AddressRefused as refused:
            raise ValidationError(f"This URL points inside our network: {refused}", code="internal_address") from None
        except httpcore.ConnectError:
            return

    def __eq__(self, other):
        return isinstance(other, PublicAddressValidator) and other.setting == self.setting
