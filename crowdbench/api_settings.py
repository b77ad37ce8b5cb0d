"""The REST API's settings (Django REST framework and drf-spectacular): fixed in code, none read from
the environment."""

REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes a request without credentials a 401.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "annotation.api.authentication.ThrottledTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Staff, and the model permissions the admin would ask for the same rows.
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAdminUser",
        "annotation.api.permissions.ModelPermissions",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "annotation.api.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "annotation.api.exceptions.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "annotation.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "annotation.api.filters.FilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "crowdbench API",
    "DESCRIPTION": "Instruction families, instances, tournaments, judgements, leaderboards "
                   "and snapshots of the VisIT-Bench crowd pipeline. Researchers only (staff token).",
    "VERSION": "1",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAdminUser"],
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from our own static files, so the pages' Content-Security-Policy can stay 'self'.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # A snapshot's status is read in two shapes (the list's and the detail's): one name for its choices.
    "ENUM_NAME_OVERRIDES": {"SnapshotStatusEnum": "annotation.models.Snapshot.Status"},
}
