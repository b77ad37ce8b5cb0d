"""The licences, authors and sources of a snapshot's images: per instance in its
`public_images_metadata`, and over the snapshot in its dataset card (issue 29, part 3).

An image's licence is what its ImageAsset records (the worker's or the researcher's choice,
annotation/collection/instructions.py LICENCES). The Hugging Face Hub names licences by its own
identifiers (cc0-1.0, cc-by-4.0, ...), so each is mapped to one; a licence the Hub has no
identifier for (the Public Domain Mark, CC BY-SA 2.0, "no known copyright restrictions") is
`other`, and an image with no licence recorded is `unknown`.
"""

import re
from urllib.parse import urlsplit

from django.db.models import Count

from annotation.collection.instructions import LICENCES
from annotation.models import ImageAsset

# The Creative Commons identifiers among the Hub's licence identifiers
# (huggingface.co/docs/hub/repositories-licenses), plus the two it keeps for the rest.
HUB_LICENCES = frozenset({
    "cc0-1.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0",
    "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-3.0",
    "cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
})
OTHER = "other"
UNKNOWN = "unknown"
# Licences that ask for no attribution: CC0 and the public domain.
_NO_ATTRIBUTION = re.compile(r"^cc0\b|public[- ]?domain|^pdm\b|publicdomain/(zero|mark)/")
_CC_URL = re.compile(r"^/(licenses|publicdomain)/([a-z-]+)/(\d\.\d)")
_CC_NAME = re.compile(r"^cc[- ]?(0|by(?:[- ](?:nc|nd|sa))*)[- ]?(\d\.\d)?$")


def hub_licence(*, licence, licence_url):
    """The Hub's identifier for an image's licence: a Creative Commons URL decides, else its name."""
    parts = urlsplit(licence_url.strip().lower())
    if parts.hostname in ("creativecommons.org", "www.creativecommons.org"):
        match = _CC_URL.match(parts.path)
        if match:
            family, kind, number = match.groups()
            identifier = "cc0-" + number if (family, kind) == ("publicdomain", "zero") else f"cc-{kind}-{number}"
            return identifier if identifier in HUB_LICENCES else OTHER
    name = licence.strip().lower()
    if not name and not licence_url.strip():
        return UNKNOWN
    match = _CC_NAME.match(name)
    if match:
        kind, number = match.groups()
        if kind == "0":
            return "cc0-1.0" if number in (None, "1.0") else OTHER
        identifier = "cc-" + re.sub(r"[- ]", "-", kind) + (f"-{number}" if number else "")
        return identifier if identifier in HUB_LICENCES else OTHER
    return OTHER


def needs_attribution(*, licence, licence_url):
    """Whether the licence asks that its author be named (everything but CC0 and the public domain)."""
    return not (_NO_ATTRIBUTION.search(licence.strip().lower())
                or _NO_ATTRIBUTION.search(licence_url.strip().lower()))


def image_metadata(image):
    """One image's public metadata in the published sheet's keys (the single-image sheet's Open
    Images rows: License as the licence's URL, Author, OriginalLandingURL), plus LicenseName, the
    licence as named, which a licence without a URL has alone. Keys with nothing recorded are left
    out, so an image without details gives {} as the published rows do. The image's own address
    is the sheet's image column already."""
    values = {
        "License": image.licence_url,
        "LicenseName": image.licence,
        "Author": image.author,
        "OriginalLandingURL": image.source_url,
    }
    return {key: value for key, value in values.items() if value}


_NAMES_BY_URL = {url: name for name, url in LICENCES.items()}
_DETAIL_LIMITS = {"licence": 200, "licence_url": 500, "author": 300, "source_url": 1000}


def _published_details(metadata):
    details = {
        "licence_url": metadata.get("License"),
        "licence": metadata.get("LicenseName") or _NAMES_BY_URL.get(metadata.get("License")),
        "author": metadata.get("Author"),
        "source_url": metadata.get("OriginalLandingURL"),
    }
    kept = {key: value.strip() for key, value in details.items()
            if isinstance(value, str) and value.strip() and len(value.strip()) <= _DETAIL_LIMITS[key]}
    for key in ("licence_url", "source_url"):
        if key in kept and not kept[key].startswith(("http://", "https://")):
            del kept[key]
    return kept if "licence" in kept or "licence_url" in kept else {}


def published_image_details(metadata, image_count):
    """Per image, the licence, author and source a published row's metadata gives (ImageAsset
    fields), {} for an image it says nothing of: the single-image sheet's Open Images rows carry
    License, Author and OriginalLandingURL, and a sheet this platform exported carries the same
    keys (with {"images": [...]} for several images), so its licences come back on import."""
    if not isinstance(metadata, dict):
        return [{}] * image_count
    per_image = metadata.get("images") if image_count > 1 else [metadata]
    if not isinstance(per_image, list) or len(per_image) != image_count:
        return [{}] * image_count
    return [_published_details(entry) if isinstance(entry, dict) else {} for entry in per_image]


def instance_metadata(images):
    """The public_images_metadata of an instance made here, from its images in order.

    One image: that image's object, as the single-image sheet writes it. Several: {"images":
    [one object per image, in the order of the images column]}, since the published multi-image
    sheet has only {} and one flat object cannot hold several licences.
    """
    objects = [image_metadata(image) for image in images]
    if not any(objects):
        return {}
    if len(objects) == 1:
        return objects[0]
    return {"images": objects}


def image_licences(*, instances):
    """[{licence, licence_url, hub_licence, images}] over the images of `instances`, most used first."""
    rows = (
        ImageAsset.objects.filter(instances__in=instances)
        .values("licence", "licence_url")
        .annotate(images=Count("pk", distinct=True))
        .order_by("-images", "licence", "licence_url")
    )
    return [{**row, "hub_licence": hub_licence(licence=row["licence"], licence_url=row["licence_url"])}
            for row in rows]


def card_licence(licences):
    """The one Hub identifier a card declares for `image_licences`: theirs when all agree, else other."""
    identifiers = {entry["hub_licence"] for entry in licences}
    if not identifiers:
        return UNKNOWN
    return identifiers.pop() if len(identifiers) == 1 else OTHER


def image_attributions(*, instances, image_url):
    """[{image, author, source, licence, licence_url}] for each image of `instances` whose recorded
    licence asks that its author be named; `image_url(image)` is the address the sheets give it."""
    images = ImageAsset.objects.filter(instances__in=instances).distinct().order_by("pk")
    return [
        {"image": image_url(image), "author": image.author, "source": image.source_url,
         "licence": image.licence, "licence_url": image.licence_url}
        for image in images.iterator(chunk_size=2000)
        # An image without a recorded licence is counted as unknown, with nobody to name.
        if (image.licence or image.licence_url)
        and needs_attribution(licence=image.licence, licence_url=image.licence_url)
    ]
