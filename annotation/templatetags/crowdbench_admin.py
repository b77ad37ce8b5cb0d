"""Template tags of the researchers' admin pages."""

from django import template

from annotation.admin.worker_check import no_worker_warning as _no_worker_warning

register = template.Library()


@register.simple_tag
def no_worker_warning():
    """The warning that queued jobs will wait, or "" while a Celery worker answers."""
    return _no_worker_warning()
