from annotation.exceptions import AnnotationError


class PlatformError(AnnotationError):
    """A platform call or action that cannot go ahead; the message is for the researcher."""


class PlatformRequestError(PlatformError):
    """The platform refused our request (MTurk RequestError, HTTP 4xx): retrying will not help."""

    def __init__(self, message, *, code="", response=None):
        super().__init__(message)
        self.code = code
        self.response = response or {}
