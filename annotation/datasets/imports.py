"""Bulk import of the published VisIT-Bench sheets (paper §2.1: reformatted datasets skip
instruction generation and arrive as a sheet).

The layout (multi-image sheet, single-image sheet, fully annotated example, and the variants real
releases of them come in) is read from the header (annotation/datasets/layouts.py). Every row is
parsed and checked before anything is written, and the whole file goes in one transaction, so a
malformed sheet imports nothing; every fault is named by row and column.

A row's key is its instruction family, instruction and image URL(s). The policy for a key seen
twice:
- a row repeating an earlier row of the file exactly is not a second instance; it is reported and
  remembered as a row of the sheet, so the sheet can be written back whole;
- a row with the key of an earlier row but different content is an error naming both rows;
- a row whose key is already an instance (an earlier import) is skipped when it says what the
  instance says, and is an error naming the instance and the columns that differ when it does not.
"""

from dataclasses import dataclass

from django.db import transaction

from annotation.collection.verification import record_imported_verdict
from annotation.datasets import cells, layouts, licences
from annotation.datasets.sheets import CellError, Problems, cell_label, parse_boolean, read_sheet
from annotation.datasets.streams import instance_contents
from annotation.exceptions import AnnotationError
from annotation.models import (
    Caption,
    ImageAsset,
    ImportedRow,
    ImportedSheet,
    Instance,
    InstanceImage,
    InstructionFamily,
    Reference,
)
from crowdbench import scoping

DEFAULT_SOURCE_NAME = "VisIT-Bench"
# The published sheets' references were written by GPT-4 (paper §2.1).
IMPORTED_REFERENCE_MODEL = "gpt-4"


@dataclass(frozen=True)
class ImportResult:
    imported_from: str
    layout: str
    created: int
    skipped: int
    repeats: tuple[tuple[int, int], ...]  # (row, the earlier row it repeats)
    families: tuple[str, ...]
    unused_columns: tuple[str, ...]

    def summary(self):
        families = len(self.families)
        parts = [
            f"{self.created} instance(s) imported, {self.skipped} already there and skipped, "
            f"{families} instruction famil{'y' if families == 1 else 'ies'} ({self.layout} sheet)."
        ]
        if self.repeats:
            rows = ", ".join(f"row {row} repeats row {first}" for row, first in self.repeats)
            parts.append(f"{len(self.repeats)} row(s) repeating an earlier row exactly were not "
                         f"imported twice ({rows}).")
        if self.unused_columns:
            parts.append("Column(s) kept as published but not read: "
                         + ", ".join(self.unused_columns) + ".")
        return " ".join(parts)

    def __str__(self):
        return f"{self.imported_from}: {self.summary()}"


@dataclass
class _Row:
    number: int
    label: str
    cells: list[str]
    content: layouts.Content

    @property
    def is_multi_image(self):
        return len(self.content.image_urls) > 1


def import_visit_bench(*, path_or_file, source_name=DEFAULT_SOURCE_NAME, group=None):
    """Import a VisIT-Bench sheet (a path, or an open file in text or binary mode).

    Each instruction_category becomes a reformatted instruction family of `source_name`, owned by
    the research `group` (None: no group); a family of that name owned otherwise is refused. Each row
    becomes an instance with its image(s), its instruction-conditioned caption, and its reference
    with the sheet's verdict. Importing a sheet twice changes nothing. No reference job is ever
    started: the sheet already carries the reference and its human rating.
    """
    problems = Problems()
    sheet = read_sheet(path_or_file, what="a VisIT-Bench sheet", problems=problems)
    try:
        layout = layouts.detect_layout(sheet.header, sheet.name)
    except CellError as error:
        raise AnnotationError(f"{sheet.name}, row 1 (header): {error}.") from None
    layout = _as_written(layout, sheet)
    rows = []
    for sheet_row in sheet.rows:
        content = cells.parse_row(
            layout, sheet_row.cells,
            on_error=lambda column, message, row=sheet_row: problems.add(
                f"{cell_label(row.label, column)}: {message}"),
        )
        if content is not None:
            rows.append(_Row(number=sheet_row.number, label=sheet_row.label,
                             cells=sheet_row.cells, content=content))
    rows, repeats = _without_repeats(rows, layout, problems)
    _check_families_are_consistent(rows, layout, problems)
    problems.raise_if_any(sheet.name)
    if not rows:
        raise AnnotationError(f"{sheet.name} has a header but no rows.")

    with transaction.atomic():
        families = _families(rows, layout, source_name, sheet.name, group)
        existing = _existing_instances(families, rows)
        new_rows, skipped = [], 0
        for row in rows:
            instance = existing.get(row.content.key)
            if instance is None:
                new_rows.append(row)
                continue
            differing = cells.differing_columns(layout, row.content, instance.content)
            if differing:
                names = ", ".join(f"“{column}”" for column in differing)
                problems.add(f"{row.label}: instance #{instance.pk} already has this "
                             f"{_key_columns(layout)} but a different {names}; change or delete "
                             "that instance first, or correct the row")
            else:
                skipped += 1
        problems.raise_if_any(sheet.name)
        if new_rows:
            _write_rows(new_rows, repeats, layout=layout, sheet=sheet, families=families,
                        source_name=source_name)
    return ImportResult(
        imported_from=sheet.name, layout=layout.name, created=len(new_rows), skipped=skipped,
        repeats=tuple((row.number, first) for row, first in repeats),
        families=tuple(sorted(families)), unused_columns=layout.extra_columns,
    )


# --- checking -----------------------------------------------------------------------------------


def _as_written(layout, sheet):
    """The layout with the file's own line ends and, per boolean column, its own spellings."""
    words = {}
    for position, concept in enumerate(layout.concepts):
        if concept not in layouts.BOOLEAN_CONCEPTS:
            continue
        seen = {}
        for row in sheet.rows:
            cell = row.cells[position].strip()
            try:
                seen.setdefault(parse_boolean(cell), cell)
            except CellError:
                continue
        default_true, default_false = layout.boolean_words[position]
        words[layout.columns[position]] = (seen.get(True, default_true),
                                           seen.get(False, default_false))
    return layouts.Layout(
        kind=layout.kind, columns=layout.columns, boolean_words=layout.boolean_words,
        line_terminator=sheet.line_terminator, ends_with_newline=sheet.ends_with_newline,
    ).with_boolean_words(words)


def _key_columns(layout):
    names = dict(zip(layout.concepts, layout.columns, strict=True))
    return ", ".join(f"“{names[c]}”" for c in (layouts.CATEGORY, layouts.INSTRUCTION, layouts.IMAGES))


def _without_repeats(rows, layout, problems):
    """The rows with exact repeats taken out (returned as (row, first row number) pairs); a row
    with an earlier row's key and other content is a problem naming both rows."""
    first = {}
    kept, repeats = [], []
    for row in rows:
        earlier = first.setdefault(row.content.key, row)
        if earlier is row:
            kept.append(row)
            continue
        differing = cells.differing_columns(layout, row.content, earlier.content)
        if differing:
            names = ", ".join(f"“{column}”" for column in differing)
            problems.add(f"{row.label}: same {_key_columns(layout)} as row {earlier.number}, but a "
                         f"different {names}; keep one of the two rows")
        else:
            repeats.append((row, earlier.number))
    return kept, repeats


def _check_families_are_consistent(rows, layout, problems):
    """A family is single- or multi-image (Table 2 splits on it), so its rows must agree."""
    names = dict(zip(layout.concepts, layout.columns, strict=True))
    first = {}
    for row in rows:
        seen = first.setdefault(row.content.category, row)
        if seen.is_multi_image != row.is_multi_image:
            problems.add(
                f"{cell_label(row.label, names[layouts.IMAGES])}: “{row.content.category}” has "
                f"{len(row.content.image_urls)} image(s) here but {len(seen.content.image_urls)} "
                f"in {seen.label}; a family is either single- or multi-image"
            )


# --- writing ------------------------------------------------------------------------------------


def _families(rows, layout, source_name, imported_from, group):
    """The rows' families, made where missing and locked.

    The lock makes a second import of the same sheet wait for the first to commit, so it sees the
    first one's instances and skips them instead of adding them again.
    """
    wanted = {}
    for row in rows:
        wanted.setdefault(row.content.category, row)
    problems = Problems()
    names = dict(zip(layout.concepts, layout.columns, strict=True))
    with scoping.every_group("family names are unique across research groups"):
        named = list(InstructionFamily.objects.filter(name__in=wanted))
    for family in named:
        row = wanted[family.name]
        if family.group_id != (group.pk if group else None):
            # Names are unique across groups: the rows would land in a family this import's group
            # does not own.
            problems.add(f"{cell_label(row.label, names[layouts.CATEGORY])}: a family “{family.name}” exists "
                         f"already, {'in another research group' if family.group_id else 'in no research group'}; "
                         "rename the category or import into that family's group")
        elif family.is_multi_image != row.is_multi_image:
            kind = "multi-image" if family.is_multi_image else "single-image"
            problems.add(
                f"{cell_label(row.label, names[layouts.CATEGORY])}: the family “{family.name}” "
                f"already exists as a {kind} family, but this row has "
                f"{len(row.content.image_urls)} image(s)"
            )
    problems.raise_if_any(imported_from)

    family_ids = []
    for name in sorted(wanted):
        family, _ = InstructionFamily.objects.get_or_create(
            name=name,
            defaults={
                "source": InstructionFamily.Source.REFORMATTED,
                "source_dataset": source_name,
                "is_multi_image": wanted[name].is_multi_image,
                "description": f"Imported from the {source_name} {layout.name} sheet.",
                "group": group,
            },
        )
        family_ids.append(family.pk)
    locked = InstructionFamily.objects.select_for_update().filter(pk__in=family_ids)
    return {family.name: family for family in locked.order_by("name")}


def _existing_instances(families, rows):
    """Instances of these families whose key a row has, each with `.content` (what it says)."""
    wanted = {row.content.key for row in rows}
    instructions = {key[1] for key in wanted}
    candidates = Instance.objects.filter(family__in=families.values(),
                                         instruction__in=instructions)
    found = {}
    for instance, content in instance_contents(candidates):
        if content.key in wanted:
            instance.content = content
            found.setdefault(content.key, instance)
    return found


def _images_by_url(rows):
    """Image assets for every URL, reusing one already stored for the same URL."""
    urls = {url for row in rows for url in row.content.image_urls}
    images = {}
    for image in ImageAsset.objects.filter(url__in=urls).order_by("-pk"):
        images[image.url] = image
    # A new image takes the licence, author and source its first row's metadata gives.
    details = {}
    for row in rows:
        urls_of_row = row.content.image_urls
        published = licences.published_image_details(row.content.metadata, len(urls_of_row))
        for url, found in zip(urls_of_row, published, strict=True):
            if found and url not in details:
                details[url] = found
    missing = sorted(urls - images.keys())
    for image in ImageAsset.objects.bulk_create(ImageAsset(url=url, **details.get(url, {})) for url in missing):
        images[image.url] = image
    return images


def _write_rows(rows, repeats, *, layout, sheet, families, source_name):
    record = ImportedSheet.objects.create(
        name=sheet.name, kind=layout.kind, source_dataset=source_name,
        columns=list(layout.columns), boolean_words=[list(pair) for pair in layout.boolean_words],
        line_terminator=layout.line_terminator, ends_with_newline=layout.ends_with_newline,
        sha256=sheet.sha256,
    )
    images = _images_by_url(rows)
    instances = {}
    imported_rows = []
    for row in rows:
        instance = _write_instance(row, family=families[row.content.category], images=images,
                                   imported_from=sheet.name, layout=layout)
        instances[row.number] = instance
        imported_rows.append(ImportedRow(sheet=record, number=row.number, instance=instance,
                                         cells=row.cells))
    for row, first in repeats:
        if first in instances:
            imported_rows.append(ImportedRow(sheet=record, number=row.number,
                                             instance=instances[first], cells=row.cells))
    ImportedRow.objects.bulk_create(imported_rows)


def _write_instance(row, *, family, images, imported_from, layout):
    content = row.content
    instance = Instance.objects.create(
        family=family, instruction=content.instruction, reference_output=content.reference_output,
        public_images_metadata=content.metadata, imported_from=imported_from,
    )
    pairs = zip(content.image_urls, content.blip2_captions, strict=True)
    InstanceImage.objects.bulk_create(
        InstanceImage(instance=instance, image=images[url], position=position, blip2_caption=blip2)
        for position, (url, blip2) in enumerate(pairs)
    )
    # Written here rather than through services.add_caption: that path enqueues reference
    # generation, and an imported row already has its reference and its rating.
    caption = Caption.objects.create(instance=instance, texts=list(content.captions))
    instance.current_caption = caption
    instance.save(update_fields=["current_caption"])
    fully_annotated = layout.kind == layouts.FULLY_ANNOTATED
    reference = Reference.objects.create(
        instance=instance, caption=caption, source=Reference.Source.IMPORTED,
        # The fully annotated example's output was written by people, not by a model.
        model="" if fully_annotated else IMPORTED_REFERENCE_MODEL,
        text=content.human_output if fully_annotated else content.prediction,
    )
    record_imported_verdict(reference=reference, reference_correct=content.correct,
                            problem_in_caption=content.problem_in_caption,
                            problem_in_response=content.problem_in_response)
    return instance
