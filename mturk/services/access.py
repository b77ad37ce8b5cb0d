"""What a study's page says about its platform before anything is clicked: whether a request can
be sent to it at all, which settings to set, and what publishing there does."""

from mturk import client as mturk_client
from mturk.platforms import backend_classes


def _backend(platform):
    # A study may name a platform work cannot be published on (an imported dataset's); publishing
    # it says so, and there is nothing to say about its credentials.
    backend = backend_classes().get(platform)
    return backend() if backend else None


def credentials_notice(platform):
    """Why nothing can be sent to the platform from here and what to set; "" when something can."""
    backend = _backend(platform)
    missing = backend.missing_credentials() if backend else []
    if not missing:
        return ""
    names = " and ".join(missing)
    if backend.publishes_per_unit:
        return (f"No MTurk credentials were found, so nothing can be sent to MTurk from here: "
                f"publishing, syncing, approving and bonuses will fail until they are. "
                f"{mturk_client.CREDENTIALS_HINT} MTURK_SANDBOX (on by default) picks the "
                "sandbox or production.")
    return (f"{names} is not set, so nothing is sent to {backend.label} from here. Publishing "
            f"records places against the budget; open them on {backend.label}'s own site. Set "
            f"{names} to sync submitted work and approve, reject and bonus through "
            f"{backend.label}'s API; until then, {backend.without_credentials}.")


def missing_credentials_note(backend):
    """The settings a study platform still lacks and what they are for; "" when none."""
    missing = backend.missing_credentials()
    if not missing:
        return ""
    return (f"{' and '.join(missing)} is not set either: set it to sync, approve and bonus through "
            f"{backend.label}'s API; until then, {backend.without_credentials}.")


def publish_notice(platform):
    """What the publish form will do on this platform, said before the researcher clicks."""
    backend = _backend(platform)
    if backend is None:
        return ""
    if backend.publishes_per_unit:
        what = (f"MTurk ({mturk_client.environment()}): one HIT per work unit, made through MTurk's "
                "API; each is called published only once MTurk answers with its HIT id.")
        notice = credentials_notice(platform)
        return f"{what} {notice}" if notice else what
    if not backend.credential_settings:
        return ("In-house: there is no platform to send to. The places are recorded here; "
                "annotators with accounts find the work on their task page.")
    what = (f"{backend.label}: nothing is sent. The places are recorded here against the budget; "
            f"open as many on {backend.label}'s own site.")
    note = missing_credentials_note(backend)
    return f"{what} {note}" if note else what
