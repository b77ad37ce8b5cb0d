"""Admin search over a large table, one field at a time.

Django's admin searches with one WHERE clause: each word must match one of the search fields, all
ORed together. When the fields lie in different tables (a reference's text and its instance's
instruction, an answer's worker and its unit) PostgreSQL cannot use an index for such an OR and
reads every row of the joined tables. Here each field is searched on its own, where its own index
answers it, and the list keeps the rows found by any of them: the same rows, as a union."""

import re

from django.core.exceptions import FieldDoesNotExist
from django.db.models import Q
from django.db.models.constants import LOOKUP_SEP
from django.utils.text import smart_split, unescape_string_literal

from annotation.models import Worker
from annotation.privacy import pseudonymise

# The search_fields prefixes Django's admin reads.
_PREFIXES = {"^": "istartswith", "=": "iexact", "@": "search"}


def search_lookup(model, field_name):
    """The ORM lookup Django's admin makes of a `search_fields` entry."""
    if field_name[:1] in _PREFIXES:
        return f"{field_name[1:]}__{_PREFIXES[field_name[0]]}"
    opts, field = model._meta, None
    for part in field_name.split(LOOKUP_SEP):
        try:
            field = opts.get_field(part)
        except FieldDoesNotExist:
            if field is not None and field.get_lookup(part):
                return field_name
            raise
        if field.is_relation:
            opts = field.related_model._meta
    return f"{field_name}__icontains"


def search_words(search_term):
    """The words of a search, as Django's admin splits them (quotes keep a phrase whole)."""
    for word in smart_split(search_term):
        if word.startswith(('"', "'")) and word[0] == word[-1]:
            word = unescape_string_literal(word)
        yield word


# A search that finds no more rows than this hands PostgreSQL their ids.
FEW_ROWS = 1000


class SearchFieldByFieldMixin:
    """Django's admin search, with each field searched on its own: a row is listed when every word
    of the search matches at least one of `search_fields`, as in Django's. Lookups are Django's
    (`^`, `=`, `@`, an explicit `__exact`, else icontains). No row can appear twice.

    The usual search (an ID, a rare word) finds few rows. Given them as a subquery, PostgreSQL
    must guess how many come back, and guessing thousands (a family's name matching any unit of the
    family, say) it reads the whole table to join them; so the rows found are first fetched, up to
    FEW_ROWS, and given by their ids. A word that finds more is given as the subquery."""

    def search_beyond_fields(self, word):
        """Querysets of rows `word` finds that no field holds (a worker's pseudonym, which is
        computed): each is one more field to the search."""
        return []

    def get_search_results(self, request, queryset, search_term):
        fields = self.get_search_fields(request)
        if not fields or not search_term:
            return super().get_search_results(request, queryset, search_term)
        lookups = [search_lookup(self.model, str(field)) for field in fields]
        rows = self.model._default_manager.order_by()
        for word in search_words(search_term):
            found = [rows.filter(Q((lookup, word))).values_list("pk", flat=True) for lookup in lookups]
            found += [matched.values_list("pk", flat=True).order_by() for matched in self.search_beyond_fields(word)]
            every = found[0].union(*found[1:], all=True) if len(found) > 1 else found[0]
            few = set(every[:FEW_ROWS + 1])
            if len(few) <= FEW_ROWS:
                queryset = queryset.filter(pk__in=few)
            else:
                queryset = queryset.filter(pk__in=found[0].union(*found[1:]) if len(found) > 1 else found[0])
        return queryset, False


# A pseudonym as the admin shows it: alone (the workers list) or after its platform (a worker's
# name in every other list, "mturk:w_3f9a1c2b7d4e8a10").
_SHOWN_PSEUDONYM = re.compile(r"^(?:(?P<platform>[a-z]+):)?(?P<pseudonym>w_[0-9a-f]{16})$")


def workers_with_pseudonym(text):
    """The ids of the workers whose pseudonym `text` is, as a list shows it ([] when it is none).

    A pseudonym is a keyed hash, never stored (it follows PSEUDONYM_KEY), so it is found by hashing
    every worker's id (of the platform named, if any) and comparing: one query of the workers'
    ids, asked only of text shaped like a pseudonym."""
    shown = _SHOWN_PSEUDONYM.match(text.strip().lower())
    if shown is None:
        return []
    workers = Worker.objects.order_by()
    if shown["platform"]:
        workers = workers.filter(platform=shown["platform"])
    return [pk for pk, platform, external_id in workers.values_list("pk", "platform", "external_id").iterator()
            if pseudonymise(platform, external_id) == shown["pseudonym"]]
