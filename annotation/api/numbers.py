"""Whole numbers in the API's query strings and paths: ids, pages, page sizes and counts, read one
strict way.

A query parameter is text, and Python and the database read more of it than a client means:
int() and django-filter's NumberFilter take "１" (a full-width digit), " 1" and "1.5" (a Decimal
that the id lookup truncates to 1), so each silently matched row 1. And past 2**63 - 1, the
largest integer of PostgreSQL's bigint and of SQLite's INTEGER alike, PostgreSQL answers nothing
but SQLite's driver raises OverflowError: a 500 on the embedded default. So every numeric
parameter is ASCII digits within its stated range, or a 400 that names the parameter.
"""

import re

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError

#: The largest id either database stores (PostgreSQL bigint, SQLite's 64-bit INTEGER).
MAX_ID = 2**63 - 1
#: An id in a URL path (the router's lookup): ASCII digits, as many as MAX_ID has.
ID_PATH_PATTERN = r"[0-9]{1,19}"
_DIGITS = re.compile(r"[0-9]+")


def whole_number(text, *, minimum, maximum):
    """int(text) when `text` is ASCII digits from `minimum` to `maximum`, else None."""
    # The length is checked before int(): Python refuses to read more than 4,300 digits at all.
    if not (_DIGITS.fullmatch(text) and len(text) <= len(str(maximum))):
        return None
    number = int(text)
    return number if minimum <= number <= maximum else None


def range_message(minimum, maximum):
    return f"A whole number from {minimum} to {maximum}, in ASCII digits."


def query_number(request, name, *, default, minimum=1, maximum=MAX_ID):
    """The whole-number query parameter `name`, `default` when it is absent, or a 400 naming it."""
    text = request.query_params.get(name)
    if text is None:
        return default
    number = whole_number(text, minimum=minimum, maximum=maximum)
    if number is None:
        raise ValidationError({name: [range_message(minimum, maximum)]})
    return number


class IdField(forms.Field):
    """A form field for an id: ASCII digits from 1 to MAX_ID."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        number = whole_number(str(value), minimum=1, maximum=MAX_ID)
        if number is None:
            raise forms.ValidationError(range_message(1, MAX_ID), code="invalid")
        return number


@extend_schema_field({"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ID})
class IdFilter(django_filters.Filter):
    """Rows whose id (or related row's id) is the one given; a malformed id is a 400 naming the
    parameter, and an id no row has matches nothing."""

    field_class = IdField
