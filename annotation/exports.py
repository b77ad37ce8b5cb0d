"""Exports in the published VisIT-Bench formats (DESIGN.md step 10).

Every table is described once (`Table`: file name, columns with their Arrow types and meanings)
and produced once, as a stream of rows, by a generator over a server-side cursor; `write_table`
consumes that stream a single time and writes, row by row, the exact CSV, the CSV meant for
spreadsheets, JSON Lines and Parquet (in row groups of EXPORT_CHUNK_ROWS). Memory therefore
follows the chunk size, never the row count.

The sheets are the inverse of annotation/imports.py: importing a published sheet and exporting it
gives the same cells, down to the published JSON serialisation (see `_dense_captions_cell`).
"""

import csv
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db.models import Count, Exists, OuterRef, Prefetch, Q

from annotation.models import (
    CHIRP_CRITERIA,
    REFERENCE_MODEL_NAME,
    HumanJudgement,
    ImageAsset,
    Instance,
    InstanceImage,
    Judgement,
    JudgeRun,
    Reference,
    multi_image_q,
)
from annotation.privacy import pseudonymise

# The multi-image sheet pads images_dense_captions to this many entries with bare NaN tokens.
DENSE_CAPTION_SLOTS = 10
# A cell starting with one of these is run as a formula by Excel, LibreOffice or Google Sheets
# (OWASP "CSV injection"); the spreadsheet variant prefixes it with an apostrophe.
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


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
_IS_MULTI = Column("is_multiple_images", pa.bool_(), "True when the instance has several images.")
_PREDICTION = Column("gpt4_prediction", pa.string(),
                     "The candidate reference a model wrote from the caption (paper §2.1); empty "
                     "when the reference was written by people.")
_REFERENCE = Column("reference_output", pa.string(),
                    "The human-verified reference; empty when the sheet gave none.")
_METADATA = Column("public_images_metadata", pa.string(),
                   "JSON object of public image metadata, as published.")

MULTI_IMAGE_SHEET = Table(
    name="visit_bench_multi_images",
    title="Verified benchmark, multi-image instances",
    description="One row per instance with several images, in the layout of the published "
                "visit_bench_multi_images.csv.",
    columns=(
        _CATEGORY,
        Column("images", pa.string(), "JSON list of image URLs, in the order shown."),
        _IS_MULTI,
        _INSTRUCTION,
        _PREDICTION,
        Column("images_dense_captions", pa.string(),
               f"JSON list of instruction-conditioned captions, one per image, padded to "
               f"{DENSE_CAPTION_SLOTS} with bare NaN tokens (Python's json reads them; strict "
               "JSON parsers do not)."),
        Column("images_blip2_captions", pa.string(), "JSON list of BLIP-2 captions, one per image."),
        _REFERENCE,
        *_RATINGS,
        _METADATA,
    ),
)
SINGLE_IMAGE_SHEET = Table(
    name="visit_bench_single_image",
    title="Verified benchmark, single-image instances",
    description="One row per single-image instance, in the single-image sheet's layout.",
    columns=(
        _CATEGORY,
        Column("image", pa.string(), "The image URL."),
        _IS_MULTI,
        _INSTRUCTION,
        _PREDICTION,
        Column("image_dense_caption", pa.string(), "The instruction-conditioned caption."),
        Column("image_blip2_caption", pa.string(), "A BLIP-2 caption, when one was imported."),
        _REFERENCE,
        *_RATINGS,
        _METADATA,
    ),
)
FULLY_ANNOTATED_SHEET = Table(
    name="visit_fully_annotated",
    title="Fully annotated instances",
    description="The layout of the published visit_fully_annotated_example.csv.",
    columns=(
        Column("image_url", pa.string(), "The image URL."),
        Column("image_dense_caption", pa.string(), "The instruction-conditioned caption."),
        _CATEGORY,
        _INSTRUCTION,
        Column("output_human_annotated", pa.string(), "The human-written reference."),
    ),
)

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
TABLES = (MULTI_IMAGE_SHEET, SINGLE_IMAGE_SHEET, FULLY_ANNOTATED_SHEET, HUMAN_PREFERENCES,
          HUMAN_PREFERENCES_WIDE, BATTLES)


# --- cells -------------------------------------------------------------------------------------


def neutralise_formula(cell):
    """The cell as text a spreadsheet shows rather than runs."""
    return "'" + cell if cell.startswith(FORMULA_TRIGGERS) else cell


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _image_url(image):
    """A URL a dataset user can fetch: our own stored files get the public base URL in front."""
    if image.url:
        return image.url
    url = image.file.url
    return url if "://" in url else settings.PUBLIC_BASE_URL.rstrip("/") + url


def _image_cell(urls):
    return urls[0] if len(urls) == 1 else json.dumps(urls)


def _dense_captions_cell(captions):
    # Python's json.dumps with its defaults (", " separators, ASCII escapes), NaN for the padding.
    padding = [math.nan] * (DENSE_CAPTION_SLOTS - len(captions))
    return json.dumps([*captions, *padding])


def _blip2_captions_cell(captions):
    # The published sheet writes a list of empty BLIP-2 captions without spaces: ["",""].
    if not any(captions):
        return json.dumps(captions, separators=(",", ":"))
    return json.dumps(captions)


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


def _with_rows_data(instances):
    return instances.select_related("family", "current_caption").prefetch_related(
        Prefetch("instanceimage_set", queryset=InstanceImage.objects.select_related("image")),
        Prefetch("references", queryset=_decided_references(), to_attr="decided_references"),
    )


def _multi_filter(multi):
    condition = multi_image_q()
    return condition if multi else ~condition


def _chosen_reference(instance):
    """The accepted reference if there is one (the latest), else the latest decided one."""
    references = instance.decided_references
    return next((r for r in references if r.verdict == Reference.Verdict.CORRECT), references[0])


def sheet_rows(*, table, instances=None, chunk_size=None) -> Iterator[tuple[int, tuple]]:
    """(instance id, row) for each instance of a sheet layout, in instance order."""
    chunk_size = chunk_size or settings.EXPORT_CHUNK_ROWS
    instances = published_instances() if instances is None else instances
    if table is MULTI_IMAGE_SHEET:
        instances = instances.filter(_multi_filter(True))
    elif table is SINGLE_IMAGE_SHEET:
        instances = instances.filter(_multi_filter(False))
    for instance in _with_rows_data(instances).iterator(chunk_size=chunk_size):
        links = list(instance.instanceimage_set.all())
        urls = [_image_url(link.image) for link in links]
        caption = instance.current_caption
        captions = list(caption.texts) if caption else [""] * len(links)
        blip2 = [link.blip2_caption for link in links]
        reference = _chosen_reference(instance)
        prediction = reference.text if reference.model else ""
        ratings = (
            reference.verdict == Reference.Verdict.CORRECT,
            reference.problem_in_caption,
            reference.problem_in_response,
        )
        metadata = json.dumps(instance.public_images_metadata)
        category = instance.family.name
        if table is MULTI_IMAGE_SHEET:
            row = (category, json.dumps(urls), len(urls) > 1, instance.instruction, prediction,
                   _dense_captions_cell(captions), _blip2_captions_cell(blip2),
                   instance.reference_output, *ratings, metadata)
        elif table is SINGLE_IMAGE_SHEET:
            row = (category, urls[0], False, instance.instruction, prediction, captions[0],
                   blip2[0], instance.reference_output, *ratings, metadata)
        else:
            row = (urls[0], captions[0], category, instance.instruction,
                   instance.reference_output or reference.text)
        yield instance.pk, row


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


def csv_writer(handle):
    # The published sheets: "\n" line ends, fields quoted only when they must be (pandas' to_csv).
    return csv.writer(handle, lineterminator="\n")


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
    if csv_file is not None:
        writer = csv_writer(csv_file)
        writer.writerow(header)
        writers.append(lambda row, w=writer: w.writerow([_csv_cell(v) for v in row]))
    if spreadsheet_file is not None:
        sheet = csv_writer(spreadsheet_file)
        sheet.writerow([neutralise_formula(name) for name in header])
        writers.append(
            lambda row, w=sheet: w.writerow([neutralise_formula(_csv_cell(v)) for v in row])
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


def export_sheet(*, table, csv_file, instances=None):
    """One benchmark sheet as CSV (the importer's inverse); returns the number of rows."""
    return write_table(table, (row for _, row in sheet_rows(table=table, instances=instances)),
                       csv_file=csv_file)


def image_licences(*, instances):
    """[{licence, licence_url, images}] over the images of `instances`, most used first."""
    rows = (
        ImageAsset.objects.filter(instances__in=instances)
        .values("licence", "licence_url")
        .annotate(images=Count("pk", distinct=True))
        .order_by("-images", "licence", "licence_url")
    )
    return [dict(row) for row in rows]
