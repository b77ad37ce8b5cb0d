"""API tokens in the admin: DRF's own page, with the user found by name rather than picked from a
select of every account (in-house annotators each have one)."""

from django.contrib import admin
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class ApiTokenAdmin(TokenAdmin):
    autocomplete_fields = ["user"]
