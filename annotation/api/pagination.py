from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """Pages of PAGE_SIZE rows; a client may ask for up to max_page_size with ?page_size=."""

    page_size_query_param = "page_size"
    max_page_size = 500
