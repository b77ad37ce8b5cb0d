"""Admin lists whose columns come from other tables (votes, images, submissions, a worker's time
and gold), with those figures worked out for the rows on the page only.

As annotations of the list's queryset, a grouped join or a subquery per row makes PostgreSQL plan
(and count, and list filter choices) over the whole table: a GROUP BY over a hundred thousand
rows, or a plan it expects to be costly enough to compile (JIT) for longer than it runs. Here the
page's rows are fetched first, then one query per figure fills them in."""

from django.contrib.admin.views.main import ChangeList


class PageRowsChangeList(ChangeList):
    def get_results(self, request):
        super().get_results(request)
        # list() fills the queryset's own cache: the rows the template shows are the ones filled
        # in, and the result list stays a queryset.
        rows = list(self.result_list)
        if rows:
            self.model_admin.fill_page_rows(request, rows)


class PageRowsAdminMixin:
    """For an admin whose list_display needs figures from other tables: `fill_page_rows(request,
    rows)` sets them as attributes on the rows of the page shown. A column sorted by such a figure
    gives the expression to sort by as its `ordering` (a subquery), so sorting reads it for every
    row only when a researcher asks for that order."""

    def get_changelist(self, request, **kwargs):
        return PageRowsChangeList

    def fill_page_rows(self, request, rows):
        raise NotImplementedError(f"{type(self).__name__} says which figures its page's rows need")
