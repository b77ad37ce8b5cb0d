"""Failed sign-ins in the admin: django-axes' own page, with its clean-up action working outside a
sign-in."""

from axes.admin import AccessAttemptAdmin
from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.contrib import admin

admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class SignInAttemptAdmin(AccessAttemptAdmin):
    @admin.action(description="Clean up expired attempts", permissions=["delete"])
    def cleanup_expired_attempts(self, request, queryset):
        # axes reads "now" from the request, where it sets it only while checking a sign-in: the
        # action on its own answered 500.
        AxesProxyHandler.update_request(request)
        super().cleanup_expired_attempts(request, queryset)
