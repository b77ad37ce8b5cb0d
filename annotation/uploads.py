"""Storing images that workers and researchers upload (DESIGN: "uploads are checked").

Every check that can be made without decoding pixels comes first: the byte count, the file type
sniffed from the content (never the name or the client's content type), and the pixel count from
the header. Only then does Pillow verify the file and decode it once, to catch damaged and
truncated files before anyone is shown them.
"""

import hashlib
import io
import math
import warnings
from dataclasses import dataclass

import filetype
from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction
from PIL import Image

from annotation.exceptions import AnnotationError
from annotation.models import ImageAsset

_READ_CHUNK_BYTES = 64 * 1024
_ACCEPTED_TYPES_TEXT = "a JPEG, PNG, WebP or GIF image"


@dataclass(frozen=True)
class _ImageType:
    extension: str
    label: str
    pillow_format: str
    # A JPEG with a Multi-Picture extension (many phone cameras) opens in Pillow as MPO.
    pillow_results: frozenset


_TYPES_BY_MIME = {
    "image/jpeg": _ImageType("jpg", "JPEG", "JPEG", frozenset({"JPEG", "MPO"})),
    "image/png": _ImageType("png", "PNG", "PNG", frozenset({"PNG"})),
    # An animated PNG is a PNG to Pillow and to browsers; filetype names it separately.
    "image/apng": _ImageType("png", "PNG", "PNG", frozenset({"PNG"})),
    "image/webp": _ImageType("webp", "WebP", "WEBP", frozenset({"WEBP"})),
    "image/gif": _ImageType("gif", "GIF", "GIF", frozenset({"GIF"})),
}


def store_uploaded_image(*, upload, uploaded_by=None, licence="", licence_url="", author="",
                         source_url=""):
    """Check an uploaded image and store it under its content hash; return the new ImageAsset.

    `upload` is a Django File (an UploadedFile from a form, or a File around an open file).
    Raises AnnotationError, with a message for the uploader, when the file is refused; nothing is
    stored then. Identical content shares one stored file, so storing it again writes nothing.
    If the database write fails the file just written is deleted; if a surrounding transaction
    rolls back later the file stays, unreferenced, and the next upload of that content reuses it.
    """
    data = _read_capped(upload)
    image_type = _sniff_type(data)
    width, height = _check_pixels(data, image_type)

    sha256 = hashlib.sha256(data).hexdigest()
    name = f"images/{sha256[:2]}/{sha256}.{image_type.extension}"
    storage = ImageAsset._meta.get_field("file").storage
    # A file already under this name has this content, unless an earlier write was cut short.
    wrote_file = not (storage.exists(name) and storage.size(name) == len(data))
    if wrote_file:
        name = storage.save(name, ContentFile(data))
    try:
        with transaction.atomic():
            return ImageAsset.objects.create(
                file=name, width=width, height=height, sha256=sha256, licence=licence,
                licence_url=licence_url, author=author, source_url=source_url,
                uploaded_by=uploaded_by,
            )
    except Exception:
        # Leave no file without its row; another row may share identical content, so keep it then.
        if wrote_file and not ImageAsset.objects.filter(file=name).exists():
            storage.delete(name)
        raise


def _read_capped(upload):
    """The upload's bytes, refusing it as soon as it is known to be over the size limit.

    The declared size is checked first, and the bytes actually read are counted as well, since a
    declared size is only a claim.
    """
    limit = settings.IMAGE_UPLOAD_MAX_BYTES
    declared = getattr(upload, "size", None)
    if declared is not None and declared > limit:
        raise AnnotationError(_too_large_message(declared, limit))
    buffer = bytearray()
    for chunk in upload.chunks(chunk_size=_READ_CHUNK_BYTES):
        buffer += chunk
        if len(buffer) > limit:
            raise AnnotationError(_too_large_message(len(buffer), limit, read_so_far=True))
    if not buffer:
        raise AnnotationError("This file is empty.")
    return bytes(buffer)


def _sniff_type(data):
    kind = filetype.guess(data)
    image_type = _TYPES_BY_MIME.get(kind.mime) if kind is not None else None
    if image_type is None:
        raise AnnotationError(f"This file is not {_ACCEPTED_TYPES_TEXT}.")
    return image_type


def _check_pixels(data, image_type):
    """(width, height) once the header, a verify pass and a full decode all agree it is sound."""
    limit = settings.IMAGE_UPLOAD_MAX_PIXELS
    damaged = AnnotationError(
        f"This {image_type.label} image is damaged or incomplete; please export it again or "
        "choose another."
    )
    with warnings.catch_warnings():
        # Pillow only warns between its limit and twice its limit; here that is a refusal too.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            # Lazy: reads the header only. Limiting the formats keeps Pillow from trying other
            # parsers on content the sniffer has already typed.
            with Image.open(io.BytesIO(data), formats=[image_type.pillow_format]) as image:
                width, height = image.size
                if width < 1 or height < 1:
                    raise damaged
                if width * height > limit:
                    raise AnnotationError(
                        f"This image is {width} × {height} pixels; the limit is "
                        f"{_megapixels(limit)} megapixels."
                    )
                if image.format not in image_type.pillow_results:
                    raise AnnotationError(f"This file is not {_ACCEPTED_TYPES_TEXT}.")
                image.verify()
            # verify() leaves the image unusable and does not decode every format (JPEG, GIF), so
            # a fresh open and a full load catch truncated pixel data.
            with Image.open(io.BytesIO(data), formats=[image_type.pillow_format]) as image:
                image.load()
        except AnnotationError:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise AnnotationError(
                f"This image has far too many pixels; the limit is {_megapixels(limit)} megapixels."
            ) from None
        except Exception:
            # Malformed input surfaces from Pillow as many types (OSError, SyntaxError,
            # struct.error, ValueError, EOFError, ...); to the uploader they all mean one thing.
            raise damaged from None
    return width, height


def _too_large_message(size, limit, *, read_so_far=False):
    if read_so_far:
        # Reading stopped at the limit, so the file's full size is unknown.
        return f"This file is larger than the limit of {_size_text(limit)}."
    return f"This file is {_size_text(size, round_up=True)}; the limit is {_size_text(limit)}."


def _size_text(count, *, round_up=False):
    # Rounded up for a refused file, so a file just over the limit never reads as "10 MB".
    unit, divisor = ("MB", 1024 * 1024) if count >= 1024 * 1024 else ("KB", 1024)
    tenths = count * 10 / divisor
    tenths = math.ceil(tenths) if round_up else round(tenths)
    return f"{_trim(tenths / 10)} {unit}"


def _megapixels(count):
    return _trim(round(count / 100_000) / 10)


def _trim(number):
    return f"{number:.1f}".removesuffix(".0")
