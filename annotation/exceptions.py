class AnnotationError(Exception):
    """An error a user can cause; the message is written for that user."""
