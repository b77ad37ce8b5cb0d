"""Storing images that workers and researchers upload (DESIGN: "uploads are checked").

Every check that can be made without decoding pixels comes first: the byte count, the file type
sniffed from the content (never the name or the client's content type), and the pixel count from
the header. Only then does Pillow verify the file and decode its first frame, to catch damaged and
truncated files before anyone is shown them.

What is stored is never the uploaded file but a new one of the same type written from those
pixels alone (issue 10): no EXIF (a phone photo's GPS position, the camera, a description), no
XMP, comments, colour profiles or text chunks, and nothing appended, so a file that is also a
script or a web page (a GIF+JS or PNG+HTML polyglot) is stored as a plain image. The EXIF
orientation is applied to the pixels first, so the photo stays upright without it; an animation
keeps its first frame, and the other frames are never decoded, however many there are. Licence
and author live in ImageAsset's own fields, never in the file.
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
from PIL import Image, ImageCms, ImageOps, JpegImagePlugin

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
    # The pixel modes the stored file is written in; anything else is converted to the first.
    stored_modes: tuple


_TYPES_BY_MIME = {
    "image/jpeg": _ImageType("jpg", "JPEG", "JPEG", frozenset({"JPEG", "MPO"}), ("RGB", "L")),
    "image/png": _ImageType("png", "PNG", "PNG", frozenset({"PNG"}),
                            ("RGBA", "RGB", "LA", "L", "1", "I;16")),
    # An animated PNG is a PNG to Pillow and to browsers; filetype names it separately.
    "image/apng": _ImageType("png", "PNG", "PNG", frozenset({"PNG"}),
                             ("RGBA", "RGB", "LA", "L", "1", "I;16")),
    "image/webp": _ImageType("webp", "WebP", "WEBP", frozenset({"WEBP"}), ("RGBA", "RGB")),
    "image/gif": _ImageType("gif", "GIF", "GIF", frozenset({"GIF"}), ("P", "L")),
}
_JPEG_QUALITY = 90
_WEBP_QUALITY = 90


def store_uploaded_image(*, upload, uploaded_by=None, licence="", licence_url="", author="",
                         source_url=""):
    """Check an uploaded image and store it under its content hash; return the new ImageAsset.

    `upload` is a Django File (an UploadedFile from a form, or a File around an open file).
    Raises AnnotationError, with a message for the uploader, when the file is refused; nothing is
    stored then. Identical content shares one stored file, so storing it again writes nothing.
    If the database write fails the file just written is deleted; if a surrounding transaction
    rolls back later the file stays, unreferenced, and the next upload of that content reuses it.
    """
    original_name = readable_file_name(getattr(upload, "name", ""))
    data = _read_capped(upload)
    image_type = _sniff_type(data)
    data, width, height = _clean_copy(_first_frame(data, image_type), image_type)

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
                uploaded_by=uploaded_by, original_name=original_name,
            )
    except Exception:
        # Leave no file without its row; another row may share identical content, so keep it then.
        if wrote_file and not ImageAsset.objects.filter(file=name).exists():
            storage.delete(name)
        raise


def readable_file_name(name):
    """The name the uploader's computer gave the file, without folders or control characters.

    It is shown to people only (the stored file is named by its hash); it is the uploader's text,
    so templates escape it like any other.
    """
    name = str(name or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable()).strip()
    field = ImageAsset._meta.get_field("original_name")
    return name[: field.max_length]


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


def _first_frame(data, image_type):
    """The first frame, decoded, once the header, a verify pass and the decode all agree it is sound."""
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
            # a fresh open and a load catch truncated pixel data. load() decodes the first frame
            # only: an animation's frame count is never asked for, so 10,000 frames cost one.
            image = Image.open(io.BytesIO(data), formats=[image_type.pillow_format])
            image.load()
            return image
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


def _clean_copy(image, image_type):
    """(bytes, width, height) of a new file of the image's type holding its upright pixels only."""
    # exif_transpose applies the orientation tag to the pixels and returns a new image.
    upright = _in_srgb(ImageOps.exif_transpose(image))
    transparency = upright.info.get("transparency")
    mode = _stored_mode(upright, image_type)
    if upright.mode != mode:
        # A GIF frame Pillow gives as RGB(A) gets a palette of its own colours, not the web palette.
        upright = upright.convert("RGB").quantize() if mode == "P" else upright.convert(mode)
    # A new image from the raw pixels carries no info, EXIF, profile or comment of the upload.
    pixels = Image.frombytes(mode, upright.size, upright.tobytes())
    options = {}
    if mode == "P":
        pixels.putpalette(upright.getpalette())
        if isinstance(transparency, int):
            options["transparency"] = transparency
    if image_type.pillow_format == "JPEG":
        options.update(_jpeg_quality(image, mode))
    elif image_type.pillow_format == "WEBP":
        options["quality"] = _WEBP_QUALITY
    buffer = io.BytesIO()
    pixels.save(buffer, format=image_type.pillow_format, **options)
    image.close()
    return buffer.getvalue(), pixels.width, pixels.height


def _stored_mode(image, image_type):
    if image_type.pillow_format == "GIF":
        return image.mode if image.mode in image_type.stored_modes else "P"
    has_alpha = image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info
    if image.mode in image_type.stored_modes and not (has_alpha and image.mode in ("RGB", "L")):
        return image.mode
    if has_alpha and "RGBA" in image_type.stored_modes:
        return "RGBA"
    if image.mode in ("1", "L", "I", "I;16", "F") and "L" in image_type.stored_modes:
        return "L"
    return "RGB"


def _in_srgb(image):
    """The image in sRGB when it carries another colour profile, so dropping the profile keeps its colours."""
    profile = image.info.get("icc_profile")
    if not profile or image.mode not in ("RGB", "RGBA", "CMYK"):
        return image
    try:
        return ImageCms.profileToProfile(
            image, ImageCms.ImageCmsProfile(io.BytesIO(profile)), ImageCms.createProfile("sRGB"),
            outputMode="RGBA" if image.mode == "RGBA" else "RGB",
        )
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        # A broken profile: the pixels as they are, without it.
        return image


def _jpeg_quality(source, mode):
    """The upload's own quantisation tables where they fit, so re-encoding costs as little quality as it can."""
    tables = getattr(source, "quantization", None)
    if tables and source.mode == mode and len(tables) <= (1 if mode == "L" else 3):
        options = {"qtables": [tables[key] for key in sorted(tables)]}
        sampling = JpegImagePlugin.get_sampling(source)
        if sampling != -1:
            options["subsampling"] = sampling
        return options
    return {"quality": _JPEG_QUALITY}


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
