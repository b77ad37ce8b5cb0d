import hashlib
import hmac
import re

from django.conf import settings


def pseudonymise(platform: str, external_id: str) -> str:
    """A stable keyed hash of a platform worker id, safe to publish."""
    digest = hmac.new(settings.PSEUDONYM_KEY.encode(), f"{platform}:{external_id}".encode(),
                      hashlib.sha256).hexdigest()
    return f"w_{digest[:16]}"


# A pseudonym as the admin shows it: alone (the workers list) or after its platform (a worker's
# name in every other list, "mturk:w_3f9a1c2b7d4e8a10").
_SHOWN_PSEUDONYM = re.compile(r"^(?:(?P<platform>[a-z]+):)?(?P<pseudonym>w_[0-9a-f]{16})$")


def workers_with_pseudonym(text):
    """The ids of the workers whose pseudonym `text` is, as a list shows it ([] when it is none).

    A pseudonym is a keyed hash, never stored (it follows PSEUDONYM_KEY), so it is found by hashing
    every worker's id (of the platform named, if any) and comparing: one query of the workers'
    ids, asked only of text shaped like a pseudonym."""
    from annotation.models import Worker

    shown = _SHOWN_PSEUDONYM.match(text.strip().lower())
    if shown is None:
        return []
    workers = Worker.objects.order_by()
    if shown["platform"]:
        workers = workers.filter(platform=shown["platform"])
    return [pk for pk, platform, external_id in workers.values_list("pk", "platform", "external_id").iterator()
            if pseudonymise(platform, external_id) == shown["pseudonym"]]
