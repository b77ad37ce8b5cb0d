"""The admin at the size of a campaign: no form lists a table that grows with the crowd in a
select, and a long list is counted by estimate, not row by row (benchmarks/researcher_pages.py
measures the pages on a world of a million judgements)."""

import pytest
from django.contrib import admin
from django.contrib.admin.widgets import AutocompleteMixin, ForeignKeyRawIdWidget, ManyToManyRawIdWidget
from django.db import connection
from django.test import RequestFactory
from django.urls import reverse

from annotation.admin import paging
from annotation.models import Stage, WorkUnit
from tests.factories import InstanceFactory

pytestmark = pytest.mark.django_db

PROJECT_APPS = {"annotation", "mturk", "webhooks", "tasks"}


def _choice_fields(form_class):
    for name, field in form_class.base_fields.items():
        if getattr(field, "queryset", None) is not None:
            widget = getattr(field.widget, "widget", field.widget)
            yield name, field.queryset.model._meta.label, widget


def test_no_admin_form_offers_a_table_that_grows_with_the_crowd_as_a_select(admin_user):
    request = RequestFactory().get("/")
    request.user = admin_user
    selects = []
    for model, model_admin in admin.site._registry.items():
        if not (model_admin.has_change_permission(request) or model_admin.has_add_permission(request)):
            continue  # read only: the change page shows each row's name, not a choice
        forms = [(model._meta.label, model_admin.get_form(request))]
        forms += [(f"{model._meta.label} inline {type(inline).__name__}", inline.get_formset(request).form)
                  for inline in model_admin.get_inline_instances(request)]
        for where, form_class in forms:
            readonly = set(model_admin.get_readonly_fields(request))
            for name, related, widget in _choice_fields(form_class):
                if name in readonly or related in paging.RESEARCHER_SIZED:
                    continue
                if not isinstance(widget, ForeignKeyRawIdWidget | ManyToManyRawIdWidget | AutocompleteMixin):
                    selects.append(f"{where}.{name} -> {related}")
    assert selects == []


def test_a_list_longer_than_the_exact_limit_is_counted_by_the_planners_estimate(admin_client, monkeypatch):
    monkeypatch.setattr(paging, "EXACT_COUNT_UP_TO", 5)
    instance = InstanceFactory()
    units = WorkUnit.objects.bulk_create([WorkUnit(stage=Stage.CAPTION, key=f"unit-{n}", instance=instance,
                                                   family=instance.family) for n in range(40)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotation_workunit")
    page = admin_client.get(reverse("admin:annotation_workunit_changelist")).content.decode()
    assert "about</span> " in page
    estimated = int(page.split("about</span> ")[1].split()[0])
    assert estimated == 40  # the statistics ANALYZE gathered, no row read to count

    # A filtered list no longer than the limit is exact, however large the table.
    page = admin_client.get(reverse("admin:annotation_workunit_changelist"),
                            {"q": units[7].key}).content.decode()
    assert "about</span>" not in page
    assert "1 work unit" in page


def test_a_short_list_is_counted_exactly(admin_client):
    instance = InstanceFactory()
    WorkUnit.objects.create(stage=Stage.CAPTION, key="only-unit", instance=instance, family=instance.family)
    page = admin_client.get(reverse("admin:annotation_workunit_changelist")).content.decode()
    assert "about</span>" not in page
    assert "1 work unit" in page


def test_every_table_that_grows_with_the_crowd_lists_with_an_estimated_count():
    counted_row_by_row = [
        model._meta.label for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in PROJECT_APPS and model._meta.label not in paging.RESEARCHER_SIZED
        and not (model_admin.paginator is paging.EstimatedCountPaginator and model_admin.show_full_result_count is False)]
    assert counted_row_by_row == []
