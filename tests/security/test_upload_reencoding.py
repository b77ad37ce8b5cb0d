"""Uploads are stored as clean re-encoded images (issue 10, finding 6); each file here is an attack."""

import io
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import ExifTags, Image, ImageCms, PngImagePlugin

from annotation.collection.uploads import store_uploaded_image

pytestmark = pytest.mark.django_db

RED, BLUE = (255, 0, 0), (0, 0, 255)
GPS = {ExifTags.GPS.GPSLatitudeRef: "N", ExifTags.GPS.GPSLatitude: (52.0, 31.0, 12.0),
       ExifTags.GPS.GPSLongitudeRef: "E", ExifTags.GPS.GPSLongitude: (13.0, 24.0, 36.0)}
XMP = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><dc:creator>Jane Private</dc:creator></x:xmpmeta>'
SECRETS = [b"SecretCam", b"Model Z9", b"our flat at Hauptstr. 5", b"Jane Private", b"Exif\x00\x00",
           b"<script", b"alert("]


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def _photo(size=(64, 48)):
    """A blue picture with a red top-left corner, so an applied rotation can be seen."""
    image = Image.new("RGB", size, BLUE)
    image.paste(RED, (0, 0, 8, 8))
    return image


def _exif(orientation=1):
    exif = Image.Exif()
    exif[ExifTags.Base.Make] = "SecretCam"
    exif[ExifTags.Base.Model] = "Model Z9"
    exif[ExifTags.Base.ImageDescription] = "our flat at Hauptstr. 5"
    exif[ExifTags.Base.Orientation] = orientation
    exif[ExifTags.IFD.GPSInfo] = GPS
    return exif


def _encode(image, format, **options):
    buffer = io.BytesIO()
    image.save(buffer, format=format, **options)
    return buffer.getvalue()


def _store(data, name="photo.bin"):
    asset = store_uploaded_image(upload=SimpleUploadedFile(name, data), licence="CC BY 4.0",
                                 author="Jane Private")
    with asset.file.open("rb") as stored:
        return asset, stored.read()


def _assert_clean(stored, format):
    for secret in SECRETS:
        assert secret not in stored
    with Image.open(io.BytesIO(stored)) as image:
        assert image.format == format
        assert not image.getexif()
        assert not {"exif", "xmp", "XML:com.adobe.xmp", "icc_profile", "comment", "Description"} & set(image.info)
        assert getattr(image, "n_frames", 1) == 1


def test_a_phone_photo_loses_gps_camera_and_description_and_stays_upright():
    # Orientation 6: the camera was turned, and viewers rotate the picture 90° clockwise.
    data = _encode(_photo(), "JPEG", exif=_exif(orientation=6), comment=b"our flat at Hauptstr. 5",
                   icc_profile=ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    assert b"SecretCam" in data

    asset, stored = _store(data)

    _assert_clean(stored, "JPEG")
    with Image.open(io.BytesIO(stored)) as image:
        assert image.size == (48, 64) == (asset.width, asset.height)
        red_corner = image.convert("RGB").getpixel((47, 0))
        assert red_corner[0] > 200 and red_corner[2] < 60
    assert (asset.licence, asset.author) == ("CC BY 4.0", "Jane Private")


@pytest.mark.parametrize("format, options", [
    ("PNG", {"pnginfo": PngImagePlugin.PngInfo()}),
    ("WEBP", {"xmp": XMP}),
])
def test_png_and_webp_lose_exif_xmp_and_text(format, options):
    if format == "PNG":
        options["pnginfo"].add_text("Description", "our flat at Hauptstr. 5")
        options["pnginfo"].add_itxt("XML:com.adobe.xmp", XMP.decode())
    data = _encode(_photo(), format, exif=_exif(), **options)
    assert b"SecretCam" in data

    _, stored = _store(data)

    _assert_clean(stored, format)


def _many_frame_gif(frames):
    """A GIF of `frames` 100×100 frames, built by repeating one frame's bytes."""
    first, second = Image.new("P", (100, 100), 1), Image.new("P", (100, 100), 2)
    for frame in (first, second):
        frame.putpalette([0, 0, 0, 255, 0, 0, 0, 0, 255] + [0] * 759)
    two = _encode(first, "GIF", save_all=True, append_images=[second], duration=40, loop=0,
                  comment=b"our flat at Hauptstr. 5")
    start = two.index(b"\x21\xf9\x04", two.index(b"\x21\xf9\x04") + 1)
    frame_bytes = two[start:-1]
    return two[:-1] + frame_bytes * (frames - 2) + b";"


def test_a_10000_frame_gif_is_stored_as_its_first_frame_without_decoding_the_rest():
    data = _many_frame_gif(10_000)
    with Image.open(io.BytesIO(data)) as check:
        assert check.n_frames == 10_000

    started = time.monotonic()
    asset, stored = _store(data)
    elapsed = time.monotonic() - started

    _assert_clean(stored, "GIF")
    with Image.open(io.BytesIO(stored)) as image:
        assert image.convert("RGB").getpixel((50, 50)) == RED
    assert (asset.width, asset.height) == (100, 100)
    # Decoding every frame takes seconds here; the first alone, milliseconds.
    assert elapsed < 2


def test_a_gif_that_is_also_javascript_is_stored_as_a_plain_gif():
    # The classic GIF+JS polyglot: the logical-screen width is "/*", opening a JS comment that the
    # bytes after the trailer close, so `<script src=...>` would run it.
    gif = (b"GIF89a/*\x01\x00\x80\x00\x00" + b"\xff\x00\x00\x00\x00\xff"
           + b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
    data = gif + b"*/=alert(document.cookie)//"

    _, stored = _store(data, name="cat.gif")

    _assert_clean(stored, "GIF")
    assert stored.endswith(b"\x00;")


def test_a_png_that_is_also_a_web_page_is_stored_as_a_plain_png():
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "<html><script>alert(document.cookie)</script>")
    data = _encode(_photo(), "PNG", pnginfo=info) + b"<html><body><script>alert(1)</script></body></html>"

    _, stored = _store(data, name="chart.png")

    _assert_clean(stored, "PNG")
    assert stored.endswith(b"IEND\xaeB`\x82")


def test_a_jpeg_with_a_page_after_its_end_is_stored_without_it():
    data = _encode(_photo(), "JPEG") + b"<html><script>alert(1)</script></html>"

    _, stored = _store(data)

    _assert_clean(stored, "JPEG")
    assert stored.endswith(b"\xff\xd9")


def test_transparency_and_colours_survive_the_re_encoding():
    image = Image.new("RGBA", (20, 20), (0, 0, 0, 0))
    image.paste((10, 200, 30, 255), (5, 5, 15, 15))

    _, stored = _store(_encode(image, "PNG"))

    with Image.open(io.BytesIO(stored)) as clean:
        assert clean.mode == "RGBA"
        assert clean.getpixel((0, 0))[3] == 0 and clean.getpixel((10, 10)) == (10, 200, 30, 255)
