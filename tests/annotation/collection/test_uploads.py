import hashlib
import io
import struct
import zlib

import pytest
from django.core.files.uploadedfile import InMemoryUploadedFile, SimpleUploadedFile
from django.db import DataError
from PIL import Image

from annotation.collection import instructions
from annotation.collection.uploads import store_uploaded_image
from annotation.exceptions import AnnotationError
from annotation.models import ImageAsset
from tests.factories import WorkerFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def stored_files(root):
    return sorted(path for path in root.rglob("*") if path.is_file())


def image_bytes(format, size=(64, 48), color=(200, 30, 40)):
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format=format)
    return buffer.getvalue()


def png_declaring(width, height):
    """A real 1×1 PNG whose header claims other dimensions, with a valid header checksum."""
    data = bytearray(image_bytes("PNG", size=(1, 1)))
    # Signature (8 bytes), IHDR length (4) and type (4), then width and height.
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def upload(data, name="photo.png", content_type="image/png"):
    return SimpleUploadedFile(name, data, content_type=content_type)


@pytest.mark.parametrize("format, extension", [("PNG", "png"), ("JPEG", "jpg"), ("WEBP", "webp"),
                                               ("GIF", "gif")])
def test_valid_image_is_stored_under_the_hash_of_the_stored_file(format, extension, media_root):
    data = image_bytes(format)
    worker = WorkerFactory()

    asset = store_uploaded_image(upload=upload(data, name="holiday.bin"), uploaded_by=worker,
                                 licence="CC0 1.0", author="A. Photographer")

    asset.refresh_from_db()
    # The stored file is a re-encoding of the upload (tests/security/test_upload_reencoding.py).
    stored = (media_root / asset.file.name).read_bytes()
    digest = hashlib.sha256(stored).hexdigest()
    assert (asset.width, asset.height) == (64, 48)
    assert asset.sha256 == digest
    assert asset.file.name == f"images/{digest[:2]}/{digest}.{extension}"
    with Image.open(io.BytesIO(stored)) as image:
        assert image.format == format and image.size == (64, 48)
    assert asset.uploaded_by == worker
    assert asset.licence == "CC0 1.0"


def test_same_content_twice_shares_one_stored_file(media_root):
    data = image_bytes("PNG")

    first = store_uploaded_image(upload=upload(data))
    second = store_uploaded_image(upload=upload(data), licence="CC BY 2.0")

    assert first.pk != second.pk
    assert first.file.name == second.file.name
    assert len(stored_files(media_root)) == 1


def test_a_cut_short_earlier_write_is_not_reused(media_root):
    data = image_bytes("PNG")
    first = store_uploaded_image(upload=upload(data))
    complete = (media_root / first.file.name).read_bytes()
    (media_root / first.file.name).write_bytes(complete[:10])

    asset = store_uploaded_image(upload=upload(data))

    assert (media_root / asset.file.name).read_bytes() == complete


def test_file_over_the_size_limit_is_refused(settings, media_root):
    settings.IMAGE_UPLOAD_MAX_BYTES = 10 * 1024 * 1024
    png = image_bytes("PNG")
    data = png + b"\0" * (int(14.2 * 1024 * 1024) - len(png))

    with pytest.raises(AnnotationError, match=r"^This file is 14\.2 MB; the limit is 10 MB\.$"):
        store_uploaded_image(upload=upload(data))

    assert stored_files(media_root) == []
    assert not ImageAsset.objects.exists()


def test_bytes_read_count_against_the_limit_whatever_size_is_declared(settings, media_root):
    settings.IMAGE_UPLOAD_MAX_BYTES = 4096
    data = image_bytes("PNG") + b"\0" * 8192
    lying = InMemoryUploadedFile(io.BytesIO(data), "image", "small.png", "image/png", size=100,
                                 charset=None)

    with pytest.raises(AnnotationError, match="larger than the limit of 4 KB"):
        store_uploaded_image(upload=lying)

    assert stored_files(media_root) == []
    assert not ImageAsset.objects.exists()


def test_text_file_named_like_a_jpeg_is_refused(media_root):
    text = upload(b"Just some notes, not a picture.\n" * 20, name="photo.jpg",
                  content_type="image/jpeg")

    with pytest.raises(AnnotationError,
                       match=r"^This file is not a JPEG, PNG, WebP or GIF image\.$"):
        store_uploaded_image(upload=text)

    assert stored_files(media_root) == []
    assert not ImageAsset.objects.exists()


def test_image_type_outside_the_allowed_list_is_refused(media_root):
    with pytest.raises(AnnotationError, match="not a JPEG, PNG, WebP or GIF"):
        store_uploaded_image(upload=upload(image_bytes("BMP"), name="photo.png"))

    assert stored_files(media_root) == []


def test_header_over_the_pixel_limit_is_refused_before_decoding(settings, media_root):
    settings.IMAGE_UPLOAD_MAX_PIXELS = 40_000_000
    # Decoding would fail on the single pixel of data: this message shows the header check refused.
    bomb = png_declaring(8000, 6000)

    with pytest.raises(AnnotationError,
                       match=r"^This image is 8000 × 6000 pixels; the limit is 40 megapixels\.$"):
        store_uploaded_image(upload=upload(bomb))

    assert stored_files(media_root) == []
    assert not ImageAsset.objects.exists()


def test_decompression_bomb_is_refused_before_decoding(media_root):
    bomb = png_declaring(20000, 20000)
    assert len(bomb) < 100

    with pytest.raises(AnnotationError, match=r"too many pixels; the limit is 40 megapixels\.$"):
        store_uploaded_image(upload=upload(bomb))

    assert stored_files(media_root) == []
    assert not ImageAsset.objects.exists()


def test_pillows_own_bomb_warning_is_a_refusal_even_under_a_higher_limit(settings, media_root):
    settings.IMAGE_UPLOAD_MAX_PIXELS = 500_000_000
    # Past Pillow's MAX_IMAGE_PIXELS (about 89.5 million) but under twice it.
    bomb = png_declaring(10000, 10000)

    with pytest.raises(AnnotationError, match="too many pixels"):
        store_uploaded_image(upload=upload(bomb))

    assert stored_files(media_root) == []


@pytest.mark.parametrize("format", ["PNG", "JPEG"])
def test_truncated_image_is_refused(format, media_root):
    buffer = io.BytesIO()
    Image.effect_noise((320, 240), 64).convert("RGB").save(buffer, format=format)
    whole = buffer.getvalue()
    truncated = whole[: len(whole) * 2 // 3]

    with pytest.raises(AnnotationError, match=r"damaged or incomplete"):
        store_uploaded_image(upload=upload(truncated, name=f"photo.{format.lower()}"))

    assert stored_files(media_root) == []
    assert not ImageAsset.objects.exists()


def test_empty_file_is_refused(media_root):
    with pytest.raises(AnnotationError, match="empty"):
        store_uploaded_image(upload=upload(b""))

    assert stored_files(media_root) == []


def test_stored_file_is_removed_when_the_database_write_fails(media_root):
    # The licence column holds 200 characters; PostgreSQL refuses the row after the file is saved.
    with pytest.raises(DataError):
        store_uploaded_image(upload=upload(image_bytes("PNG")), licence="x" * 300)

    assert stored_files(media_root) == []
    assert not ImageAsset.objects.exists()


def test_failed_write_keeps_a_file_another_image_already_uses(media_root):
    data = image_bytes("PNG")
    kept = store_uploaded_image(upload=upload(data))

    with pytest.raises(DataError):
        store_uploaded_image(upload=upload(data), licence="x" * 300)

    assert stored_files(media_root) == [media_root / kept.file.name]
    assert list(ImageAsset.objects.all()) == [kept]


def instruction_lease(*, multi=False):
    from annotation.crowdwork.queue import lease_unit
    from tests.frontend_support import instruction_unit

    worker = WorkerFactory()
    return worker, lease_unit(worker=worker, unit=instruction_unit(multi=multi))


def slot(data=None, **details):
    return {"upload": upload(data) if data else None, "url": "", "licence": "CC0 1.0",
            "author": "me", "source_url": "", **details}


def test_an_instruction_sent_twice_stores_its_uploaded_image_once(media_root):
    worker, lease = instruction_lease()
    seeds, seed_files = ImageAsset.objects.count(), len(stored_files(media_root))
    sent = {"assignment_id": lease.pk, "worker": worker,
            "instruction": "What is written on the sign above the door, and in which language?"}
    first = instructions.submit_instruction_with_images(**sent, slots=[slot(image_bytes("PNG"))])
    again = instructions.submit_instruction_with_images(**sent, slots=[slot(image_bytes("PNG"))])
    assert again.pk == first.pk
    assert ImageAsset.objects.count() == seeds + 1
    assert len(stored_files(media_root)) == seed_files + 1


@pytest.mark.parametrize(("second", "message"), [
    ({"url": "https://example.org/a.png", "licence": "All rights reserved"}, "licence of image 2"),
    ({"url": "https://example.org/a.png", "author": ""}, "author of image 2"),
    ({"url": "javascript:alert(1)"}, "link of image 2 is not a web address"),
    ({"url": "https://example.org/a.png", "with_file": True}, "For image 2, upload a file or give a link"),
])
def test_a_bad_slot_is_named_and_no_image_of_the_form_is_stored(media_root, second, message):
    worker, lease = instruction_lease(multi=True)
    seeds, seed_files = ImageAsset.objects.count(), stored_files(media_root)
    with_file = second.pop("with_file", False)
    with pytest.raises(AnnotationError, match=message):
        instructions.submit_instruction_with_images(
            assignment_id=lease.pk, worker=worker,
            instruction="What is written on the sign above the door, and in which language?",
            slots=[slot(image_bytes("PNG")), slot(image_bytes("JPEG") if with_file else None, **second)])
    assert ImageAsset.objects.count() == seeds and stored_files(media_root) == seed_files
