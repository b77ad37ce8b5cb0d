from rest_framework.pagination import PageNumberPagination

from annotation.api.numbers import MAX_ID, query_number


class Pagination(PageNumberPagination):
    """Pages of PAGE_SIZE rows; a client may ask for up to max_page_size with ?page_size=.

    Both numbers are read strictly (annotation/api/numbers.py): DRF would answer `page=abc` with a
    404 and quietly use the default page size for `page_size=abc` or cut `page_size=1000` to 500.
    A page number past the last page is still DRF's 404 ("Invalid page.")."""

    page_size_query_param = "page_size"
    max_page_size = 500
    # DRF also reads page=last; here a page is a number like every other.
    last_page_strings = ()

    def get_page_number(self, request, paginator):
        return query_number(request, self.page_query_param, default=1, maximum=MAX_ID)

    def get_page_size(self, request):
        return query_number(request, self.page_size_query_param, default=self.page_size,
                            maximum=self.max_page_size)
