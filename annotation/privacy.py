import hashlib
import hmac

from django.conf import settings


def pseudonymise(platform: str, external_id: str) -> str:
    """A stable keyed hash of a platform worker id, safe to publish."""
    digest = hmac.new(settings.PSEUDONYM_KEY.encode(), f"{platform}:{external_id}".encode(),
                      hashlib.sha256).hexdigest()
    return f"w_{digest[:16]}"
