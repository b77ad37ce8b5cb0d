"""Bulk import of the published VisIT-Bench sheets (paper §2.1: reformatted datasets skip
instruction generation and arrive as a sheet).

Three layouts are recognised from the header: the multi-image sheet, the single-image sheet, and
the fully annotated example. Every row is parsed and checked before anything is written, and the
whole file goes in one transaction, so a malformed sheet imports nothing. Rows are numbered as a
spreadsheet shows them (the header is row 1); when a long field spans several lines the line
where the row starts is given too.
"""

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from annotation.exceptions import AnnotationError
from annotation.models import (
    Caption,
    ImageAsset,
    Instance,
    InstanceImage,
    InstructionFamily,
    Reference,
)
from annotation.services import record_imported_verdict

DEFAULT_SOURCE_NAME = "VisIT-Bench"
# The published sheets' references were written by GPT-4 (paper §2.1).
IMPORTED_REFERENCE_MODEL = "gpt-4"
MAX_REPORTED_ERRORS = 20

TRUE_WORDS = {"true", "1"}
FALSE_WORDS = {"false", "0"}

RATING_COLUMNS = (
    "human_ratings_gpt4_correct",
    "human_ratings_problem_in_caption",
    "human_ratings_problem_in_gpt4",
)


@dataclass(frozen=True)
class Layout:
    """A published sheet layout, known by its required columns.

    Optional columns, read when present: is_multiple_images, the BLIP-2 caption(s),
    reference_output and public_images_metadata.
    """

    name: str
    required: tuple[str, ...]


MULTI_IMAGE = Layout(
    name="multi-image",
    required=("instruction_category", "images", "instruction", "gpt4_prediction",
              "images_dense_captions", *RATING_COLUMNS),
)
SINGLE_IMAGE = Layout(
    name="single-image",
    required=("instruction_category", "image", "instruction", "gpt4_prediction",
              "image_dense_caption", *RATING_COLUMNS),
)
FULLY_ANNOTATED = Layout(
    name="fully annotated",
    required=("image_url", "image_dense_caption", "instruction_category", "instruction",
              "output_human_annotated"),
)
LAYOUTS = (MULTI_IMAGE, SINGLE_IMAGE, FULLY_ANNOTATED)


@dataclass(frozen=True)
class ImportResult:
    imported_from: str
    layout: str
    created: int
    skipped: int
    families: tuple[str, ...]

    def summary(self):
        families = len(self.families)
        return (
            f"{self.created} instance(s) imported, {self.skipped} already there and skipped, "
            f"{families} instruction famil{'y' if families == 1 else 'ies'} ({self.layout} sheet)."
        )

    def __str__(self):
        return f"{self.imported_from}: {self.summary()}"


@dataclass
class _Row:
    """One sheet row, parsed and checked, ready to be written."""

    label: str
    category: str
    instruction: str
    image_urls: list[str]
    captions: list[str]
    blip2_captions: list[str]
    reference_text: str
    reference_model: str
    reference_output: str
    public_images_metadata: dict
    gpt4_correct: bool
    problem_in_caption: bool
    problem_in_gpt4: bool
    is_multi_image: bool

    @property
    def key(self):
        return (self.category, self.instruction, tuple(self.image_urls))


@dataclass
class _Errors:
    messages: list[str] = field(default_factory=list)
    total: int = 0

    def add(self, message):
        self.total += 1
        if len(self.messages) < MAX_REPORTED_ERRORS:
            self.messages.append(message)

    def raise_if_any(self, imported_from):
        if not self.total:
            return
        more = self.total - len(self.messages)
        lines = [f"{imported_from}: {self.total} problem(s) found; nothing was imported."]
        lines += self.messages
        if more:
            lines.append(f"… and {more} more.")
        raise AnnotationError("\n".join(lines))


class _CellError(Exception):
    pass


def import_visit_bench(*, path_or_file, source_name=DEFAULT_SOURCE_NAME):
    """Import a VisIT-Bench sheet (a path, or an open file in text or binary mode).

    Each instruction_category becomes a reformatted instruction family of `source_name`. Each row
    becomes an instance with its image(s), its instruction-conditioned caption, and its reference
    with the sheet's verdict. Rows already imported (same family, instruction and image URLs) are
    skipped, so importing a sheet twice changes nothing. No reference job is ever started: the
    sheet already carries the reference and its human rating.
    """
    imported_from, text = _read(path_or_file)
    layout, rows = _parse(text, imported_from)
    with transaction.atomic():
        families = _families(rows, layout, source_name, imported_from)
        existing = _existing_keys(families)
        images = _images_by_url(rows)
        created = skipped = 0
        for row in rows:
            if row.key in existing:
                skipped += 1
                continue
            _write_row(row, family=families[row.category], images=images,
                       imported_from=imported_from)
            existing.add(row.key)
            created += 1
    return ImportResult(imported_from=imported_from, layout=layout.name, created=created,
                        skipped=skipped, families=tuple(sorted(families)))


# --- reading and checking ----------------------------------------------------------------------


def _read(path_or_file):
    if isinstance(path_or_file, str | Path):
        path = Path(path_or_file)
        try:
            data = path.read_bytes()
        except OSError as error:
            raise AnnotationError(f"Cannot read {path}: {error.strerror}.") from None
        name = path.name
    else:
        data = path_or_file.read()
        name = Path(getattr(path_or_file, "name", "") or "upload.csv").name
    if isinstance(data, bytes):
        try:
            # utf-8-sig: spreadsheets often save a byte-order mark in front of the header.
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise AnnotationError(
                f"{name} is not UTF-8 text (byte {error.start}); save the sheet as UTF-8 CSV."
            ) from None
    return name, data.removeprefix("\ufeff")


def _parse(text, imported_from):
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header:
            raise AnnotationError(
                f"{imported_from} is empty: a VisIT-Bench sheet needs a header row."
            )
        header = [name.strip() for name in header]
        layout = _detect_layout(header, imported_from)
        errors = _Errors()
        rows = []
        number = 1
        previous_line = reader.line_num
        for cells in reader:
            number += 1
            first_line = previous_line + 1
            previous_line = reader.line_num
            if not any(cell.strip() for cell in cells):
                continue
            label = f"row {number}" if first_line == number else f"row {number} (line {first_line})"
            if len(cells) != len(header):
                errors.add(f"{label}: {len(cells)} cells, but the header has {len(header)} columns")
                continue
            row = _parse_row(dict(zip(header, cells, strict=True)), layout, label, errors)
            if row is not None:
                rows.append(row)
    except csv.Error as error:
        raise AnnotationError(
            f"{imported_from}, line {reader.line_num}: not a readable CSV file ({error})."
        ) from None
    _check_families_are_consistent(rows, errors)
    errors.raise_if_any(imported_from)
    if not rows:
        raise AnnotationError(f"{imported_from} has a header but no rows.")
    return layout, rows


def _detect_layout(header, imported_from):
    columns = set(header)
    missing_by_layout = [(layout, [c for c in layout.required if c not in columns])
                         for layout in LAYOUTS]
    for layout, missing in missing_by_layout:
        if not missing:
            return layout
    closest, missing = min(missing_by_layout, key=lambda pair: len(pair[1]))
    names = ", ".join(f"“{name}”" for name in missing)
    raise AnnotationError(
        f"{imported_from}, row 1 (header): not a VisIT-Bench sheet; missing column(s) {names} "
        f"of the {closest.name} layout."
    )


def _parse_row(cells, layout, label, errors):
    """The row as a _Row, or None after adding to `errors` what is wrong with it."""
    values = {}
    errors_before = errors.total

    def cell(column, parse, *args):
        try:
            values[column] = parse(cells.get(column, ""), *args)
        except _CellError as error:
            errors.add(f'{label}, column "{column}": {error}')

    cell("instruction_category", _text, 200)
    cell("instruction", _text)
    if layout is MULTI_IMAGE:
        cell("images", _url_list)
        count = len(values.get("images", ()))
        if count:
            cell("images_dense_captions", _caption_list, count, True)
            cell("images_blip2_captions", _caption_list, count, False)
        urls = values.get("images")
        captions = values.get("images_dense_captions")
        blip2 = values.get("images_blip2_captions")
    else:
        url_column = "image" if layout is SINGLE_IMAGE else "image_url"
        cell(url_column, _url)
        cell("image_dense_caption", _text)
        cell("image_blip2_caption", _optional_text)
        urls = [values[url_column]] if url_column in values else None
        captions = [values["image_dense_caption"]] if "image_dense_caption" in values else None
        blip2 = [values.get("image_blip2_caption", "")]

    if layout is FULLY_ANNOTATED:
        cell("output_human_annotated", _text)
        reference_text = values.get("output_human_annotated")
        ratings = (True, False, False)
    else:
        cell("gpt4_prediction", _text)
        cell("reference_output", _optional_text)
        cell("public_images_metadata", _json_object)
        for column in RATING_COLUMNS:
            cell(column, _boolean)
        reference_text = values.get("gpt4_prediction")
        ratings = tuple(values.get(column) for column in RATING_COLUMNS)

    if urls and cells.get("is_multiple_images", "").strip():
        cell("is_multiple_images", _boolean)
        said = values.get("is_multiple_images")
        if said is not None and said != (len(urls) > 1):
            errors.add(f'{label}, column "is_multiple_images": says {said}, but the row has '
                       f"{len(urls)} image(s)")

    if errors.total > errors_before:
        return None
    return _Row(
        label=label,
        # Family names are compared and shown, so stray spaces around a category would split it.
        category=values["instruction_category"].strip(),
        instruction=values["instruction"],
        image_urls=urls,
        captions=captions,
        blip2_captions=blip2,
        reference_text=reference_text,
        # The fully annotated example's output was written by people, not by a model.
        reference_model="" if layout is FULLY_ANNOTATED else IMPORTED_REFERENCE_MODEL,
        reference_output=(reference_text if layout is FULLY_ANNOTATED
                          else values.get("reference_output", "")),
        public_images_metadata=values.get("public_images_metadata", {}),
        gpt4_correct=ratings[0],
        problem_in_caption=ratings[1],
        problem_in_gpt4=ratings[2],
        is_multi_image=len(urls) > 1,
    )


def _check_families_are_consistent(rows, errors):
    """A family is single- or multi-image (Table 2 splits on it), so its rows must agree."""
    first = {}
    for row in rows:
        seen = first.setdefault(row.category, row)
        if seen.is_multi_image != row.is_multi_image:
            # Only the multi-image layout has rows of different sizes.
            errors.add(
                f'{row.label}, column "images": “{row.category}” has {len(row.image_urls)} '
                f"image(s) here but {len(seen.image_urls)} in {seen.label}; a family is either "
                "single- or multi-image"
            )


# Cell parsers: return the value, or raise _CellError with a message for the person fixing the
# sheet. Values are kept as published (not stripped) so an export round-trips unchanged.


def _text(value, max_length=None):
    if not value.strip():
        raise _CellError("is empty")
    if max_length and len(value) > max_length:
        raise _CellError(f"is longer than {max_length} characters")
    return value


def _optional_text(value):
    return value


def _boolean(value):
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise _CellError(
        f"{_shorten(value)} is not a boolean (True/False, TRUE/FALSE, true/false or 1/0)"
    )


def _url(value):
    url = value.strip()
    if not _looks_like_url(url):
        raise _CellError(f"{_shorten(value)} is not an http(s) URL")
    return url


def _looks_like_url(value):
    # URLs in the published sheets may contain spaces ("Architectural Styles/..."), so Django's
    # URLValidator would reject real data; the scheme and the field's length are what matter here.
    return (
        isinstance(value, str)
        and value.startswith(("http://", "https://"))
        and len(value) <= ImageAsset._meta.get_field("url").max_length
    )


def _url_list(value):
    parsed = _json(value)
    if not isinstance(parsed, list) or not parsed or not all(_looks_like_url(u) for u in parsed):
        raise _CellError("not a JSON list of URLs")
    return [url.strip() for url in parsed]


def _caption_list(value, image_count, required):
    """One caption per image. The multi-image sheet pads dense captions to 10 with bare NaN."""
    if not value.strip():
        if required:
            raise _CellError("is empty")
        return [""] * image_count
    parsed = _json(value)
    if not isinstance(parsed, list):
        raise _CellError("not a JSON list of captions")
    while parsed and _is_missing(parsed[-1]):
        parsed.pop()
    if len(parsed) != image_count:
        raise _CellError(f"{len(parsed)} caption(s) for {image_count} image(s)")
    captions = []
    for position, caption in enumerate(parsed, start=1):
        if _is_missing(caption) and not required:
            caption = ""
        if not isinstance(caption, str):
            raise _CellError(f"caption {position} is not text")
        if required and not caption.strip():
            raise _CellError(f"caption {position} is empty")
        captions.append(caption)
    return captions


def _json_object(value):
    if not value.strip():
        return {}
    parsed = _json(value)
    if not isinstance(parsed, dict):
        raise _CellError("not a JSON object")
    return parsed


def _json(value):
    # Python's json accepts the bare NaN tokens of the published sheets; strict parsers do not.
    try:
        return json.loads(value)
    except ValueError as error:
        raise _CellError(f"not valid JSON ({error.msg} at character {error.pos})") from None


def _is_missing(value):
    return value is None or (isinstance(value, float) and math.isnan(value))


def _shorten(value, limit=40):
    value = value.strip()
    return repr(value if len(value) <= limit else value[: limit - 1] + "…")


# --- writing -----------------------------------------------------------------------------------


def _families(rows, layout, source_name, imported_from):
    """The rows' families, made where missing and locked.

    The lock makes a second import of the same sheet wait for the first to commit, so it sees the
    first one's instances and skips them instead of adding them again.
    """
    wanted = {}
    for row in rows:
        wanted.setdefault(row.category, row)
    errors = _Errors()
    for family in InstructionFamily.objects.filter(name__in=wanted):
        row = wanted[family.name]
        if family.is_multi_image != row.is_multi_image:
            kind = "multi-image" if family.is_multi_image else "single-image"
            errors.add(
                f'{row.label}, column "instruction_category": the family “{family.name}” already '
                f"exists as a {kind} family, but this row has {len(row.image_urls)} image(s)"
            )
    errors.raise_if_any(imported_from)

    family_ids = []
    for name in sorted(wanted):
        family, _ = InstructionFamily.objects.get_or_create(
            name=name,
            defaults={
                "source": InstructionFamily.Source.REFORMATTED,
                "source_dataset": source_name,
                "is_multi_image": wanted[name].is_multi_image,
                "description": f"Imported from the {source_name} {layout.name} sheet.",
            },
        )
        family_ids.append(family.pk)
    locked = InstructionFamily.objects.select_for_update().filter(pk__in=family_ids)
    return {family.name: family for family in locked.order_by("name")}


def _existing_keys(families):
    keys = {}
    links = (
        InstanceImage.objects.filter(instance__family__in=families.values())
        .order_by("instance_id", "position")
        .values_list("instance_id", "instance__family__name", "instance__instruction", "image__url")
    )
    for instance_id, family_name, instruction, url in links:
        keys.setdefault(instance_id, (family_name, instruction, []))[2].append(url)
    return {(name, instruction, tuple(urls)) for name, instruction, urls in keys.values()}


def _images_by_url(rows):
    """Image assets for every URL, reusing one already stored for the same URL."""
    urls = {url for row in rows for url in row.image_urls}
    images = {}
    for image in ImageAsset.objects.filter(url__in=urls).order_by("-pk"):
        images[image.url] = image
    missing = sorted(urls - images.keys())
    for image in ImageAsset.objects.bulk_create(ImageAsset(url=url) for url in missing):
        images[image.url] = image
    return images


def _write_row(row, *, family, images, imported_from):
    instance = Instance.objects.create(
        family=family, instruction=row.instruction, reference_output=row.reference_output,
        public_images_metadata=row.public_images_metadata, imported_from=imported_from,
    )
    pairs = zip(row.image_urls, row.blip2_captions, strict=True)
    InstanceImage.objects.bulk_create(
        InstanceImage(instance=instance, image=images[url], position=position, blip2_caption=blip2)
        for position, (url, blip2) in enumerate(pairs)
    )
    # Written here rather than through services.add_caption: that path enqueues reference
    # generation, and an imported row already has its reference and its rating.
    caption = Caption.objects.create(instance=instance, texts=row.captions)
    instance.current_caption = caption
    instance.save(update_fields=["current_caption"])
    reference = Reference.objects.create(
        instance=instance, caption=caption, source=Reference.Source.IMPORTED,
        model=row.reference_model, text=row.reference_text,
    )
    record_imported_verdict(reference=reference, gpt4_correct=row.gpt4_correct,
                            problem_in_caption=row.problem_in_caption,
                            problem_in_gpt4=row.problem_in_gpt4)
    return instance
