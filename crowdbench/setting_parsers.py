"""Values of settings that need more than django-environ's parsing, checked as the settings load, so
a mistyped value stops the process with the variable's name rather than failing a request later."""

import ipaddress

from django.core.exceptions import ImproperlyConfigured


def proxy_ssl_header(value):
    """`X-Forwarded-Proto: https` as Django's ("HTTP_X_FORWARDED_PROTO", "https")."""
    if not value:
        return None
    name, separator, expected = value.partition(":")
    if not separator or not name.strip() or not expected.strip():
        raise ImproperlyConfigured("DJANGO_SECURE_PROXY_SSL_HEADER reads like 'X-Forwarded-Proto: https'.")
    return "HTTP_" + name.strip().upper().replace("-", "_"), expected.strip()


def networks(name, values):
    for value in values:
        try:
            ipaddress.ip_network(value.strip(), strict=False)
        except ValueError as error:
            raise ImproperlyConfigured(f"{name}: {error} (give CIDRs such as 10.0.0.0/8, comma-separated)") from None
    return values
