"""The API's filters: django-filter's, with every id read by annotation.api.numbers.

django-filter makes a ModelChoiceFilter for a relation named in `Meta.fields` or a view's
`filterset_fields`; its form field reads the id with int(), which takes "１" and " 1". Here a
relation or an id field gets an IdFilter instead, so no numeric filter escapes the strict reading.
"""

from django.db import models
from django_filters import rest_framework as filters

from annotation.api.numbers import IdFilter

_IDS = {field: {"filter_class": IdFilter}
        for field in (models.AutoField, models.BigAutoField, models.ForeignKey, models.OneToOneField)}


class FilterSet(filters.FilterSet):
    FILTER_DEFAULTS = {**filters.FilterSet.FILTER_DEFAULTS, **_IDS}


class FilterBackend(filters.DjangoFilterBackend):
    """The filter backend of every API view: a view's `filterset_fields` are built on FilterSet."""

    filterset_base = FilterSet
