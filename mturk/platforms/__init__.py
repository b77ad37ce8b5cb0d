"""The crowd platforms behind one small interface (see base.Backend)."""

from annotation.models import Worker


def backend_classes():
    from mturk.platforms.cloudresearch import CloudResearchBackend
    from mturk.platforms.local import LocalBackend
    from mturk.platforms.mturk import MTurkBackend
    from mturk.platforms.prolific import ProlificBackend

    return {
        Worker.Platform.MTURK: MTurkBackend,
        Worker.Platform.CLOUDRESEARCH: CloudResearchBackend,
        Worker.Platform.PROLIFIC: ProlificBackend,
        Worker.Platform.LOCAL: LocalBackend,
    }


def get_backend(platform):
    backend = backend_classes().get(platform)
    if backend is None:
        from mturk.exceptions import PlatformError

        raise PlatformError(f"Work cannot be published on {platform}.")
    return backend()
