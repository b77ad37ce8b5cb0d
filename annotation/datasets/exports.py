"""Exports in the published VisIT-Bench formats (DESIGN.md step 10).

Every table is described once (`Table`: file name, columns with their Arrow types and meanings)
and produced once, as a stream of rows, by a generator over a server-side cursor; `write_table`
consumes that stream a single time and writes, row by row, the exact CSV, the CSV meant for
spreadsheets, JSON Lines and Parquet (in row groups of EXPORT_CHUNK_ROWS). Memory therefore
follows the chunk size, never the row count.

The benchmark sheets are the inverse of annotation/datasets/imports.py. A sheet is written in the layout
of the published file its instances were imported from when they all came from files of one
layout (so a published sheet imported alone comes back byte for byte: its columns, booleans as
written, JSON cells as written, line ends); otherwise in the published layout of its kind, with
an `instance_id` column that predictions.csv files can be matched by.
"""

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db.models import Count, Exists, OuterRef, Prefetch, Q

from annotation.datasets import layouts
from annotation.models import (
    CHIRP_CRITERIA,
    REFERENCE_MODEL_NAME,
    HumanJudgement,
    ImageAsset,
    ImportedRow,
    ImportedSheet,
    Instance,
    InstanceImage,
    Judgement,
    JudgeRun,
    Reference,
    multi_image_q,
)
from annotation.privacy import pseudonymise
from annotation.public_urls import public_url

# A cell starting with one of these, after any leading whitespace or line breaks, is run as a
# formula by Excel, LibreOffice or Google Sheets (OWASP "CSV injection"), the full-width and small
# forms included (spreadsheets fold them to ASCII); the spreadsheet copy prefixes an apostrophe.
FORMULA_TRIGGERS = frozenset("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20\ufe66\ufe62\ufe63\ufe6b\u2212")
STABLE_KEY_COLUMN = "instance_id"


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    description: str


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    description: str
    columns: tuple[Column, ...]
    # Benchmark sheets: how the CSV spells booleans and ends its lines.
    layout: layouts.Layout | None = None

    @property
    def header(self):
        return [column.name for column in self.columns]

    @property
    def schema(self):
        return pa.schema([pa.field(column.name, column.type) for column in self.columns])


_RATINGS = (
    Column("human_ratings_gpt4_correct", pa.bool_(),
           "Verification: the crowd judged the candidate reference (gpt4_prediction) correct."),
    Column("human_ratings_problem_in_caption", pa.bool_(),
           "Verification: when incorrect, the problem was in the instruction-conditioned caption."),
    Column("human_ratings_problem_in_gpt4", pa.bool_(),
           "Verification: when incorrect, the problem was in the model's response."),
)
_CATEGORY = Column("instruction_category", pa.string(), "The instruction family.")
_INSTRUCTION = Column("instruction", pa.string(), "The instruction, as written.")

_MEANINGS = {
    layouts.CATEGORY: "The instruction family.",
    layouts.INSTRUCTION: "The instruction, as written.",
    layouts.IS_MULTI: "True when the instance has several images.",
    layouts.PREDICTION: "The candidate reference a model wrote from the caption (paper §2.1); empty "
                        "when the reference was written by people.",
    layouts.REFERENCE_OUTPUT: "The human-verified reference; empty when the sheet gave none.",
    layouts.METADATA: "JSON object of public image metadata, as published.",
    layouts.HUMAN_OUTPUT: "The human-written (or human-verified) reference.",
    **{column.name: column.description for column in _RATINGS},
}
_MEANINGS_BY_KIND = {
    layouts.MULTI_IMAGE: {
        layouts.IMAGES: "JSON list of image URLs, in the order shown.",
        layouts.CAPTIONS: f"JSON list of instruction-conditioned captions, one per image, padded to "
                          f"{layouts.DENSE_CAPTION_SLOTS} with bare NaN tokens (Python's json reads "
                          "them; strict JSON parsers do not).",
        layouts.BLIP2: "JSON list of BLIP-2 captions, one per image.",
    },
    layouts.SINGLE_IMAGE: {
        layouts.IMAGES: "The image URL.",
        layouts.CAPTIONS: "The instruction-conditioned caption (one text, despite the plural name "
                          "the published sheet gives the column).",
        layouts.BLIP2: "A BLIP-2 caption, when one was imported.",
    },
}
_MEANINGS_BY_KIND[layouts.FULLY_ANNOTATED] = _MEANINGS_BY_KIND[layouts.SINGLE_IMAGE]
_TITLES = {
    layouts.MULTI_IMAGE: ("visit_bench_multi_images", "Verified benchmark, multi-image instances",
                          "One row per instance with several images, in the layout of the "
                          "published visit_bench_multi_images.csv."),
    layouts.SINGLE_IMAGE: ("visit_bench_single_image", "Verified benchmark, single-image instances",
                           "One row per single-image instance, in the layout of the published "
                           "visit_bench_single_image.csv."),
    layouts.FULLY_ANNOTATED: ("visit_fully_annotated", "Fully annotated single-image instances",
                              "One row per single-image instance with its human-verified output, "
                              "in the layout of the published visit_fully_annotated_example.csv."),
}


def sheet_table(layout, *, stable_key):
    """The Table a sheet layout writes; `stable_key` adds the instance_id column at the end."""
    name, title, description = _TITLES[layout.kind]
    columns = []
    for column, concept in zip(layout.columns, layout.concepts, strict=True):
        if concept in layouts.BOOLEAN_CONCEPTS:
            kind = pa.bool_()
        else:
            kind = pa.string()
        meaning = (_MEANINGS_BY_KIND[layout.kind].get(concept) or _MEANINGS.get(concept)
                   or "Kept as the imported sheet wrote it; empty for instances made here.")
        columns.append(Column(column, kind, meaning))
    if stable_key:
        columns.append(Column(STABLE_KEY_COLUMN, pa.int64(),
                              "The instance's stable key: give it in predictions.csv to match "
                              "the row to this instance."))
    return Table(name=name, title=title, description=description, columns=tuple(columns),
                 layout=layout)


MULTI_IMAGE_SHEET = sheet_table(layouts.Layout.published(layouts.MULTI_IMAGE), stable_key=True)
SINGLE_IMAGE_SHEET = sheet_table(layouts.Layout.published(layouts.SINGLE_IMAGE), stable_key=True)
FULLY_ANNOTATED_SHEET = sheet_table(layouts.Layout.published(layouts.FULLY_ANNOTATED),
                                    stable_key=True)
SHEETS = {layouts.MULTI_IMAGE: MULTI_IMAGE_SHEET, layouts.SINGLE_IMAGE: SINGLE_IMAGE_SHEET,
          layouts.FULLY_ANNOTATED: FULLY_ANNOTATED_SHEET}

_PREFERENCE_COLUMNS = (
    Column("image_url", pa.string(),
           "The image URL; a JSON list of URLs for a multi-image instance."),
    _INSTRUCTION,
    Column("A", pa.string(), "The response of A_model."),
    Column("B", pa.string(), "The response of B_model."),
    Column("A_model", pa.string(), "The model that wrote A (the verified reference is "
                                   f"“{REFERENCE_MODEL_NAME}”)."),
    Column("B_model", pa.string(), "The model that wrote B."),
    Column("model_selection.A", pa.bool_(), "The worker preferred A."),
    Column("model_selection.B", pa.bool_(), "The worker preferred B."),
)
HUMAN_PREFERENCES = Table(
    name="human_preferences",
    title="Human preferences",
    description="One row per human judgement (a worker's forced choice on a battle), in the "
                "columns of the published visit_bench_human_preferences.csv.",
    columns=_PREFERENCE_COLUMNS,
)
HUMAN_PREFERENCES_WIDE = Table(
    name="human_preferences_wide",
    title="Human preferences, with criteria and workers",
    description="One row per human judgement and criterion answered (overall first, then CHIRP's "
                "criteria when the study asked them): the published columns, then more.",
    columns=(
        *_PREFERENCE_COLUMNS,
        Column("criterion", pa.string(), f"The criterion judged: one of {', '.join(CHIRP_CRITERIA)}."),
        Column("worker", pa.string(), "The worker's pseudonym (a keyed hash; never the platform id)."),
        Column("time_taken_seconds", pa.float64(), "Seconds the worker was active on the page."),
        Column("side_shown_A", pa.string(), "Where A was shown: left (Response 1) or right."),
        Column("side_chosen", pa.string(), "The side the worker picked: left or right."),
        Column("rubric_score.A", pa.int64(), "1-5 rubric score of A, when the study asked one."),
        Column("rubric_score.B", pa.int64(), "1-5 rubric score of B, when the study asked one."),
        _CATEGORY,
        Column("study", pa.string(), "The preference study."),
        Column("battle_id", pa.int64(), "The battle (instance, A, B)."),
        Column("instance_id", pa.int64(), "The instance."),
        Column("judgement_id", pa.int64(), "The judgement."),
        Column("submitted_at", pa.string(), "When the judgement was stored (ISO 8601, UTC)."),
    ),
)
_LIST = pa.list_(pa.string())
BATTLES = Table(
    name="battles",
    title="LLM judge battles",
    description="One line per battle and judge, as the VisIT-Bench leaderboard publishes them: "
                "each battle is asked in both orderings (A first, then B first). Battles against "
                "the verified reference are left out, as published, to limit test-set leakage.",
    columns=(
        Column("A_model", pa.string(), "Which model wrote A."),
        Column("B_model", pa.string(), "Which model wrote B."),
        Column("A", pa.string(), "The prediction of A_model."),
        Column("B", pa.string(), "The prediction of B_model."),
        Column("image_url", pa.string(), "The image URL; a JSON list for several images."),
        _INSTRUCTION,
        _CATEGORY,
        Column("engine", pa.string(), "The judge model."),
        Column("evaluated_with_reference", pa.bool_(),
               "The judge was shown the human-verified reference."),
        Column("auto_evaluation_result", _LIST,
               "The winner of each of the two queries: a model name, or tie."),
        Column("auto_evaluation_cot", _LIST, "The judge's chain of thought in each query."),
        Column("A_model_in_cot", _LIST, "The model called Response A in each chain of thought."),
        Column("B_model_in_cot", _LIST, "The model called Response B in each chain of thought."),
    ),
)


# --- cells -------------------------------------------------------------------------------------


def neutralise_formula(cell):
    """The cell as text a spreadsheet shows rather than runs."""
    text = cell.lstrip()
    if cell[:1] in FORMULA_TRIGGERS or text[:1] in FORMULA_TRIGGERS:
        return "'" + cell
    return cell


def _csv_cell(value, words=("True", "False")):
    if value is None:
        return ""
    if isinstance(value, bool):
        return words[0] if value else words[1]
    if isinstance(value, list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _image_url(image):
    """A URL a dataset user can fetch: our own stored files get the public base URL in front."""
    if image.url:
        return image.url
    return public_url(image.file.url)


def _image_cell(urls):
    return urls[0] if len(urls) == 1 else json.dumps(urls)


# --- rows --------------------------------------------------------------------------------------


def _decided_references():
    return Reference.objects.exclude(verdict=Reference.Verdict.PENDING).order_by("instance_id", "-id")


def published_instances():
    """Instances that go into the benchmark sheets.

    Verified instances, and the instances of published sheets we re-imported: those sheets keep
    rows whose candidate was rated incorrect (the human_ratings_* columns say so), and a snapshot
    must give back what was published. Instances our own verifiers discarded, or a reference
    flagged harmful, never leave.
    """
    decided = _decided_references().filter(instance=OuterRef("pk"))
    return (
        Instance.objects.filter(
            Q(status=Instance.Status.VERIFIED)
            | Q(status=Instance.Status.DISCARDED, imported_from__gt=""),
            Exists(decided),
        )
        .exclude(Exists(Reference.objects.filter(instance=OuterRef("pk"), flagged_harmful=True)))
        .order_by("id")
    )


def _content_prefetches(prefix=""):
    return (
        Prefetch(f"{prefix}instanceimage_set", queryset=InstanceImage.objects.select_related("image")),
        Prefetch(f"{prefix}references", queryset=_decided_references(), to_attr="decided_references"),
    )


def _chosen_reference(instance):
    """The accepted reference if there is one (the latest), else the latest decided one."""
    references = instance.decided_references
    correct = (r for r in references if r.verdict == Reference.Verdict.CORRECT)
    return next(correct, references[0] if references else None)


def _content(instance):
    """What an instance says, in the terms of the published sheets (loaded with its prefetches)."""
    links = list(instance.instanceimage_set.all())
    caption = instance.current_caption
    reference = _chosen_reference(instance)
    text = reference.text if reference else ""
    return layouts.Content(
        category=instance.family.name,
        instruction=instance.instruction,
        image_urls=tuple(_image_url(link.image) for link in links),
        captions=tuple(caption.texts) if caption else ("",) * len(links),
        blip2_captions=tuple(link.blip2_caption for link in links),
        prediction=text if reference and reference.model else "",
        reference_output=instance.reference_output,
        human_output=instance.reference_output or text,
        metadata=instance.public_images_metadata,
        correct=bool(reference) and reference.verdict == Reference.Verdict.CORRECT,
        problem_in_caption=bool(reference) and reference.problem_in_caption,
        problem_in_gpt4=bool(reference) and reference.problem_in_response,
    )


def instance_contents(instances, *, chunk_size=None):
    """(instance, Content) for each instance of a queryset, in its order."""
    chunk_size = chunk_size or settings.EXPORT_CHUNK_ROWS
    loaded = instances.select_related("family", "current_caption").prefetch_related(
        *_content_prefetches(),
        Prefetch("imported_rows", queryset=ImportedRow.objects.select_related("sheet")),
    )
    for instance in loaded.iterator(chunk_size=chunk_size):
        yield instance, _content(instance)


def sheet_instances(kind, instances=None):
    """The published instances a sheet of this kind holds (the fully annotated sheet: single-image)."""
    instances = published_instances() if instances is None else instances
    multi = multi_image_q()
    return instances.filter(multi) if kind == layouts.MULTI_IMAGE else instances.exclude(multi)


def _stored_layout(sheet):
    return layouts.Layout(kind=sheet.kind, columns=tuple(sheet.columns),
                          boolean_words=tuple(tuple(pair) for pair in sheet.boolean_words),
                          line_terminator=sheet.line_terminator,
                          ends_with_newline=sheet.ends_with_newline)


def _source_sheets(kind, instances):
    """The imported sheets to write these instances back as, or None.

    Only when every instance came from sheets of this kind that share one layout: a mixed table
    is written in the published layout, with the stable key.
    """
    sheets = list(ImportedSheet.objects.filter(kind=kind, rows__instance__in=instances)
                  .distinct().order_by("pk"))
    if not sheets or len({_stored_layout(sheet) for sheet in sheets}) != 1:
        return None
    from_sheets = ImportedRow.objects.filter(instance=OuterRef("pk"), sheet__in=sheets)
    if instances.exclude(Exists(from_sheets)).exists():
        return None
    return sheets


def sheet_export(kind, instances=None, *, keep_imported_layout=None, chunk_size=None):
    """(table, rows) of a benchmark sheet; rows yield (instance id, row) in the table's order.

    The whole benchmark (no `instances` given) keeps an imported layout where it can, so a
    published sheet comes back as published; a chosen part of it (a family's sheet, the file a
    researcher adds predictions to) is written in the published layout with the stable key,
    unless `keep_imported_layout` says otherwise.
    """
    chunk_size = chunk_size or settings.EXPORT_CHUNK_ROWS
    if keep_imported_layout is None:
        keep_imported_layout = instances is None
    instances = sheet_instances(kind, instances)
    sheets = _source_sheets(kind, instances) if keep_imported_layout else None
    if sheets is None:
        return SHEETS[kind], _published_layout_rows(kind, instances, chunk_size)
    layout = _stored_layout(sheets[0])
    return sheet_table(layout, stable_key=False), _source_layout_rows(layout, sheets, instances,
                                                                      chunk_size)


def _source_layout_rows(layout, sheets, instances, chunk_size):
    rows = (
        ImportedRow.objects.filter(sheet__in=sheets, instance__in=instances)
        .select_related("instance__family", "instance__current_caption")
        .prefetch_related(*_content_prefetches("instance__"))
        .order_by("sheet_id", "number")
    )
    for imported in rows.iterator(chunk_size=chunk_size):
        content = _content(imported.instance)
        yield imported.instance_id, tuple(
            layouts.kept_or_written(layout, position, imported.cells[position], content)
            for position in range(len(layout.columns))
        )


def _published_layout_rows(kind, instances, chunk_size):
    table = SHEETS[kind]
    layout = table.layout
    for instance, content in instance_contents(instances.order_by("id"), chunk_size=chunk_size):
        raw = _raw_cells_by_concept(instance, kind)
        cells = tuple(
            layouts.kept_or_written(layout, position, raw.get(concept), content)
            if concept is not None else ""
            for position, concept in enumerate(layout.concepts)
        )
        yield instance.pk, (*cells, instance.pk)


def _raw_cells_by_concept(instance, kind):
    """The cells the instance was imported with, by concept, from a sheet whose cells are written
    like this kind's (JSON lists in the multi-image sheet, single values elsewhere)."""
    multi = kind == layouts.MULTI_IMAGE
    for imported in instance.imported_rows.all():
        if (imported.sheet.kind == layouts.MULTI_IMAGE) == multi:
            concepts = [layouts.concept_of(column) for column in imported.sheet.columns]
            return {concept: cell for concept, cell in zip(concepts, imported.cells, strict=True)
                    if concept is not None}
    return {}


def _image_cells(instance_ids_query):
    """Image cell per instance, for the instances a query names (bounded by instances, not rows)."""
    urls = {}
    links = (
        InstanceImage.objects.filter(instance__in=instance_ids_query)
        .select_related("image")
        .order_by("instance_id", "position")
    )
    for link in links.iterator(chunk_size=settings.EXPORT_CHUNK_ROWS):
        urls.setdefault(link.instance_id, []).append(_image_url(link.image))
    return {instance_id: _image_cell(u) for instance_id, u in urls.items()}


_JUDGEMENT_FIELDS = (
    "id", "battle__instance_id", "battle__instance__instruction", "battle__response_a__text",
    "battle__response_b__text", "battle__response_a__model_name", "battle__response_b__model_name",
    "shown_left", "choice",
)
_WIDE_FIELDS = (
    "criteria", "rubric_scores", "active_seconds", "worker__platform", "worker__external_id",
    "battle__instance__family__name", "battle__study__name", "battle_id", "created_at",
)


def human_judgements(*, studies):
    return HumanJudgement.objects.filter(battle__study__in=studies).order_by("id")


def human_preference_rows(*, studies, wide=False, chunk_size=None) -> Iterator[tuple]:
    """The human preference CSV's rows: one per judgement (wide: per judgement and criterion)."""
    chunk_size = chunk_size or settings.EXPORT_CHUNK_ROWS
    judgements = human_judgements(studies=studies)
    images = _image_cells(judgements.values("battle__instance_id"))
    fields = _JUDGEMENT_FIELDS + (_WIDE_FIELDS if wide else ())
    pseudonyms = {}
    for values in judgements.values_list(*fields).iterator(chunk_size=chunk_size):
        (pk, instance_id, instruction, text_a, text_b, model_a, model_b, shown_left,
         choice) = values[:9]
        a_on_left = shown_left == HumanJudgement.ShownLeft.A
        base = (images.get(instance_id, ""), instruction, text_a, text_b, model_a, model_b)
        if not wide:
            chose_a = (choice == "left") == a_on_left
            yield (*base, chose_a, not chose_a)
            continue
        (criteria, rubric, seconds, platform, external_id, category, study, battle_id,
         created_at) = values[9:]
        worker_key = (platform, external_id)
        if worker_key not in pseudonyms:
            pseudonyms[worker_key] = pseudonymise(platform, external_id)
        side_a, side_b = ("left", "right") if a_on_left else ("right", "left")
        answers = [("overall", choice)] + [
            (name, criteria.get(name)) for name in CHIRP_CRITERIA[1:] if criteria.get(name)
        ]
        for criterion, side in answers:
            chose_a = side == side_a
            yield (*base, chose_a, not chose_a, criterion, pseudonyms[worker_key], seconds,
                   side_a, side, rubric.get(side_a), rubric.get(side_b), category, study,
                   battle_id, instance_id, pk, created_at.isoformat())


_BATTLE_FIELDS = (
    "run_id", "run__engine", "run__mode", "battle_id", "battle__instance_id",
    "battle__instance__instruction", "battle__instance__family__name", "battle__response_a__text",
    "battle__response_b__text", "battle__response_a__model_name", "battle__response_b__model_name",
    "ordering", "winner", "cot",
)


def judge_judgements(*, studies, include_reference=False):
    """Overall pairwise judgements of finished judge runs, grouped by run and battle."""
    judgements = Judgement.objects.filter(
        run__study__in=studies, run__status=JudgeRun.Status.DONE, criterion="overall"
    ).exclude(run__mode=JudgeRun.Mode.PROMETHEUS)
    if not include_reference:
        judgements = judgements.exclude(
            Q(battle__response_a__model_name=REFERENCE_MODEL_NAME)
            | Q(battle__response_b__model_name=REFERENCE_MODEL_NAME)
        )
    return judgements.order_by("run_id", "battle_id", "ordering")


def battle_rows(*, studies, include_reference=False, chunk_size=None) -> Iterator[tuple]:
    """The judge battles JSONL's records: one per (judge run, battle), both orderings inside."""
    chunk_size = chunk_size or settings.EXPORT_CHUNK_ROWS
    judgements = judge_judgements(studies=studies, include_reference=include_reference)
    images = _image_cells(judgements.values("battle__instance_id"))
    group, key = [], None
    for values in judgements.values_list(*_BATTLE_FIELDS).iterator(chunk_size=chunk_size):
        if values[0:4:3] != key and group:
            yield _battle_record(group, images)
            group = []
        key = values[0:4:3]
        group.append(values)
    if group:
        yield _battle_record(group, images)


def _battle_record(group, images):
    (_, engine, mode, _, instance_id, instruction, category, text_a, text_b, model_a,
     model_b) = group[0][:11]
    names = {Judgement.Winner.A: model_a, Judgement.Winner.B: model_b, Judgement.Winner.TIE: "tie"}
    results, cots, a_in_cot, b_in_cot = [], [], [], []
    for *_, ordering, winner, cot in group:
        results.append(names[winner])
        cots.append(cot)
        first, second = (model_a, model_b) if ordering == Judgement.Ordering.AB else (model_b, model_a)
        a_in_cot.append(first)
        b_in_cot.append(second)
    return (model_a, model_b, text_a, text_b, images.get(instance_id, ""), instruction, category,
            engine, mode == JudgeRun.Mode.REFERENCE_BACKED, results, cots, a_in_cot, b_in_cot)


# --- writing -----------------------------------------------------------------------------------


def csv_line(cells):
    """One CSV record without its line end, quoted where needed (pandas' to_csv does the same).

    The record is formed as if lines ended with CRLF, so a cell holding a carriage return, a line
    feed or both is always quoted, whatever line end the file then uses: a lone CR left bare
    starts a new row in spreadsheet programs.
    """
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(cells)
    return buffer.getvalue()[:-2]


class CsvWriter:
    """Writes CSV records with a given line end, and with or without one after the last record."""

    def __init__(self, handle, *, line_terminator="\n", ends_with_newline=True):
        self.handle = handle
        self.line_terminator = line_terminator
        self.ends_with_newline = ends_with_newline
        self.started = False

    def writerow(self, cells):
        line = csv_line(cells)
        if self.ends_with_newline:
            self.handle.write(line + self.line_terminator)
        else:
            self.handle.write((self.line_terminator if self.started else "") + line)
        self.started = True


def csv_writer(handle, table=None):
    layout = table.layout if table is not None else None
    if layout is None:
        return CsvWriter(handle)
    return CsvWriter(handle, line_terminator=layout.line_terminator,
                     ends_with_newline=layout.ends_with_newline)


def _cell_writers(table):
    """Per column, the function that turns a row value into CSV text."""
    layout = table.layout
    words = [("True", "False")] * len(table.columns)
    if layout is not None:
        words[: len(layout.columns)] = [pair if all(pair) else ("True", "False")
                                        for pair in layout.boolean_words]
    return [lambda value, pair=pair: _csv_cell(value, pair) for pair in words]


class _ParquetSink:
    def __init__(self, table, where, chunk_rows):
        self.schema = table.schema
        self.writer = pq.ParquetWriter(where, self.schema, compression="zstd")
        self.chunk_rows = chunk_rows
        self.columns = [[] for _ in table.columns]

    def add(self, row):
        for values, value in zip(self.columns, row, strict=True):
            values.append(value)
        if len(self.columns[0]) >= self.chunk_rows:
            self.flush()

    def flush(self):
        if self.columns[0]:
            batch = pa.RecordBatch.from_arrays(
                [pa.array(values, type=field.type) for values, field in zip(self.columns, self.schema,
                                                                              strict=True)],
                schema=self.schema,
            )
            self.writer.write_batch(batch)
            self.columns = [[] for _ in self.columns]

    def close(self):
        self.flush()
        self.writer.close()


def write_table(table: Table, rows: Iterable[tuple], *, csv_file=None, spreadsheet_file=None,
                jsonl_file=None, parquet_file=None, chunk_rows=None, on_row=None):
    """Write a table's rows, read once, to every file given; returns the number of rows.

    csv_file, spreadsheet_file and jsonl_file are text files opened with newline=""; parquet_file
    is a path or a binary file. `on_row(row)` sees each row as written (the snapshot hashes them).
    """
    chunk_rows = chunk_rows or settings.EXPORT_CHUNK_ROWS
    header = table.header
    writers = []
    cell_writers = _cell_writers(table)

    def texts(row):
        return [write(value) for write, value in zip(cell_writers, row, strict=True)]

    if csv_file is not None:
        writer = csv_writer(csv_file, table)
        writer.writerow(header)
        writers.append(lambda row, w=writer: w.writerow(texts(row)))
    if spreadsheet_file is not None:
        sheet = csv_writer(spreadsheet_file, table)
        sheet.writerow([neutralise_formula(name) for name in header])
        writers.append(
            lambda row, w=sheet: w.writerow([neutralise_formula(text) for text in texts(row)])
        )
    if jsonl_file is not None:
        writers.append(
            lambda row, f=jsonl_file: f.write(
                json.dumps(dict(zip(header, row, strict=True)), ensure_ascii=False) + "\n"
            )
        )
    parquet = _ParquetSink(table, parquet_file, chunk_rows) if parquet_file is not None else None
    if parquet is not None:
        writers.append(parquet.add)
    if on_row is not None:
        writers.append(on_row)
    count = 0
    try:
        for row in rows:
            for write in writers:
                write(row)
            count += 1
    finally:
        if parquet is not None:
            parquet.close()
    return count


def export_sheet(*, kind, csv_file, instances=None):
    """One benchmark sheet as CSV (the importer's inverse); returns the number of rows."""
    table, rows = sheet_export(kind, instances)
    return write_table(table, (row for _, row in rows), csv_file=csv_file)


def image_licences(*, instances):
    """[{licence, licence_url, images}] over the images of `instances`, most used first."""
    rows = (
        ImageAsset.objects.filter(instances__in=instances)
        .values("licence", "licence_url")
        .annotate(images=Count("pk", distinct=True))
        .order_by("-images", "licence", "licence_url")
    )
    return [dict(row) for row in rows]
