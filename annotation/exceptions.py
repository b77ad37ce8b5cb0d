class AnnotationError(Exception):
    """An error a user can cause; the message is written for that user."""


class WorkerFacingError(AnnotationError):
    """What a worker or participant in front of one of our pages cannot do now, and why; the
    message is for them, so it names nothing of another worker, a setting or the platform's API."""
