"""The crowd platforms behind one small interface (see base.Backend). A platform is known in its
own module here and nowhere else: its API, fees, identity checks, blocks, study defaults and the
words its workers are told are its backend's methods and attributes."""


def backend_classes():
    """Every backend, by the platform it speaks for, in the order researchers are offered them."""
    from mturk.platforms.cloudresearch import CloudResearchBackend
    from mturk.platforms.local import LocalBackend
    from mturk.platforms.mturk import MTurkBackend
    from mturk.platforms.prolific import ProlificBackend
    from mturk.platforms.toloka import TolokaBackend

    return {backend.platform: backend for backend in (
        MTurkBackend, ProlificBackend, CloudResearchBackend, TolokaBackend, LocalBackend)}


def backend_class(platform):
    """The backend class of `platform`. Work of no crowd platform (in-house, or imported with a
    dataset) is LocalBackend's: nothing is sent anywhere, and nothing is billed."""
    from mturk.platforms.local import LocalBackend

    return backend_classes().get(platform, LocalBackend)


def get_backend(platform):
    backend = backend_classes().get(platform)
    if backend is None:
        from mturk.exceptions import PlatformError

        raise PlatformError(f"Work cannot be published on {platform}.")
    return backend()


def per_unit_platforms():
    """The platforms that publish one task per unit (MTurk's HITs), whose workers arrive by it."""
    return [platform for platform, backend in backend_classes().items() if backend.publishes_per_unit]
