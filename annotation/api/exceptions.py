"""The one place where errors a user can cause become API answers (STYLE: one exception handler
at the API's edge): the domain's AnnotationError and Django's ValidationError (a model's clean(), a
field validator) are a 400 with their message, never a 500."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import ValidationError
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler as drf_exception_handler

from annotation.exceptions import AnnotationError


def exception_handler(exc, context):
    if isinstance(exc, AnnotationError):
        exc = ValidationError({"detail": str(exc)})
    elif isinstance(exc, DjangoValidationError):
        exc = ValidationError(as_serializer_error(exc))
    return drf_exception_handler(exc, context)
