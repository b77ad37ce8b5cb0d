"""Response headers of the annotator pages: who may frame them, and what they may load.

Django's `X-Frame-Options: DENY` would blank the page inside MTurk's iframe, and the header cannot
name an allowed parent, so these pages replace it with a Content-Security-Policy whose
`frame-ancestors` names the crowd platforms' worker origins only. The same policy allows our own
scripts and styles only (worker text can never run as a script even if it escaped escaping), and
images only from this site and the researcher's allow-list, so a URL a worker typed is never
fetched by another worker's browser.
"""

from functools import wraps
from urllib.parse import urlsplit

from django.conf import settings


def _origin(url):
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def content_security_policy(*, frameable, staff_page=False):
    """The policy of a page. Every page has one (crowdbench/middleware.py gives it to the rest), so
    no page makes a browser fetch an image from a host a worker chose.

    A `staff_page` (admin, dashboard, Swagger UI) also allows inline styles and data: images, which
    their own templates and stylesheets use; neither reaches the network.
    """
    image_sources = ["'self'", "blob:", *(["data:"] if staff_page else []), *settings.IMAGE_MEDIA_ORIGINS,
                     *(f"https://{host}" for host in settings.IMAGE_URL_ALLOWED_HOSTS)]
    ancestors = ["'self'", *settings.ANNOTATOR_FRAME_ANCESTORS] if frameable else ["'none'"]
    # Only a stage page posts its assignment back to MTurk.
    form_targets = ["'self'", *([] if staff_page else (_origin(url) for url in settings.MTURK_SUBMIT_ORIGINS))]
    directives = [
        "default-src 'self'",
        f"img-src {' '.join(image_sources)}",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'" if staff_page else "style-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        f"form-action {' '.join(form_targets)}",
        f"frame-ancestors {' '.join(ancestors)}",
    ]
    return "; ".join(directives)


def annotator_page(view=None, *, frameable=True):
    """Give a view the annotator pages' headers; `frameable` pages may sit in a platform iframe."""

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            response = view(request, *args, **kwargs)
            response["Content-Security-Policy"] = content_security_policy(frameable=frameable)
            response["Referrer-Policy"] = "same-origin"
            response["X-Content-Type-Options"] = "nosniff"
            if frameable:
                # frame-ancestors above decides instead; XFrameOptionsMiddleware honours this flag.
                response.xframe_options_exempt = True
            return response

        return wrapped

    return decorate(view) if view is not None else decorate


def mturk_submit_origin(turk_submit_to):
    """The allowed origin `turkSubmitTo` names, or "" when it names anything else."""
    origin = _origin((turk_submit_to or "").strip())
    allowed = {_origin(url) for url in settings.MTURK_SUBMIT_ORIGINS}
    return origin if origin and origin in allowed else ""
