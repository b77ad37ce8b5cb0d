"""API tokens, throttled like passwords: a wrong token counts as a failed sign-in (django-axes)."""

from axes.handlers.proxy import AxesProxyHandler
from django.contrib.auth.signals import user_login_failed
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header

from crowdbench.lockout import lockout_message


class LockedOut(exceptions.APIException):
    status_code = 429
    default_code = "locked_out"


class ThrottledTokenAuthentication(TokenAuthentication):
    """DRF's token check behind django-axes' lockout.

    A client locked out (by failed passwords or failed tokens, from its address) is refused before
    its token is looked at, so a right token after too many wrong ones gets nothing either.
    """

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        http_request = request._request
        if not AxesProxyHandler.is_allowed(http_request):
            raise LockedOut(lockout_message())
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            # A token names no user, so the failure counts against the client's address.
            user_login_failed.send(sender=type(self), credentials={}, request=http_request)
            raise
