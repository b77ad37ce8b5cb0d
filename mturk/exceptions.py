from annotation.exceptions import AnnotationError


class PlatformError(AnnotationError):
    """A platform call or action that cannot go ahead; the message is for the researcher.

    `sent` is False when the error came before any request left this machine (no credentials, a
    request our checks refused), so the platform cannot have acted on it.
    """

    def __init__(self, message, *, sent=True):
        super().__init__(message)
        self.sent = sent


class PlatformRequestError(PlatformError):
    """The platform refused our request (MTurk RequestError, HTTP 4xx): retrying will not help."""

    def __init__(self, message, *, code="", response=None, sent=True):
        super().__init__(message, sent=sent)
        self.code = code
        self.response = response or {}
