"""The response policy every page gets."""

from crowdbench.security import content_security_policy


class ContentSecurityPolicyMiddleware:
    """A Content-Security-Policy on every response that has none of its own.

    The annotator pages set a stricter one themselves (crowdbench/security.py); the admin, the
    dashboard, the API's browsable pages and the error pages get this one, which keeps images to
    this site, the media origins and the allowed image hosts (an admin's browser never loads a link a
    worker typed from anywhere else, the cloud metadata address included) and scripts to our own.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = content_security_policy(frameable=False, staff_page=True)
        return response
