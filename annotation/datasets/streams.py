"""The rows of each exported table, produced once as a stream by a generator over a server-side
cursor, and their cells as the published files write them (spreadsheet-safe where asked).

The benchmark sheets are the inverse of annotation/datasets/imports.py. A sheet is written in the layout
of the published file its instances were imported from when they all came from files of one
layout (so a published sheet imported alone comes back byte for byte: its columns, booleans as
written, JSON cells as written, line ends); otherwise in the published layout of its kind, with
an `instance_id` column that predictions.csv files can be matched by.
"""

import json
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Exists, OuterRef, Prefetch, Q

from annotation.datasets import cells, layouts, licences
from annotation.datasets.formats import SHEETS, sheet_table
from annotation.exceptions import AnnotationError
from annotation.models import (
    CHIRP_CRITERIA,
    REFERENCE_MODEL_NAME,
    Battle,
    HumanJudgement,
    ImportedRow,
    ImportedSheet,
    InstanceImage,
    JudgeJudgement,
    JudgeRun,
    Reference,
    multi_image_q,
)
from annotation.models.benchmark import benchmark_instances, benchmark_references
from annotation.privacy import pseudonymise
from annotation.public_urls import public_url


def _image_url(image):
    """A URL a dataset user can fetch: our own stored files get the public base URL in front."""
    if image.url:
        return image.url
    return public_url(image.file.url)


def _image_cell(urls):
    return urls[0] if len(urls) == 1 else json.dumps(urls)


# --- rows --------------------------------------------------------------------------------------


def _decided_references():
    return benchmark_references().order_by("instance_id", "-id")


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
        # Metadata a published sheet gave is kept as published; an instance made here carries its
        # images' licences, authors and sources.
        metadata=instance.public_images_metadata or licences.instance_metadata(link.image for link in links),
        correct=bool(reference) and reference.verdict == Reference.Verdict.CORRECT,
        problem_in_caption=bool(reference) and reference.problem_in_caption,
        problem_in_response=bool(reference) and reference.problem_in_response,
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
    """The benchmark instances a sheet of this kind holds (the fully annotated sheet: single-image)."""
    instances = benchmark_instances() if instances is None else instances
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
            cells.kept_or_written(layout, position, imported.cells[position], content,
                                  as_published=True)
            for position in range(len(layout.columns))
        )


def _published_layout_rows(kind, instances, chunk_size):
    table = SHEETS[kind]
    layout = table.layout
    for instance, content in instance_contents(instances.order_by("id"), chunk_size=chunk_size):
        raw = _raw_cells_by_concept(instance, kind)
        row = tuple(
            cells.kept_or_written(layout, position, raw.get(concept), content)
            if concept is not None else ""
            for position, concept in enumerate(layout.concepts)
        )
        yield instance.pk, (*row, instance.pk)


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


# A battle's cells, read once per battle: its judgements (about 30 a battle in a large tournament)
# share them, and fetching and writing them once per judgement was most of an export's time.
_BATTLE_CELLS = (
    "id", "instance_id", "instance__instruction", "response_a__text", "response_b__text",
    "response_a__model_name", "response_b__model_name",
)
_JUDGEMENT_FIELDS = ("battle_id", "id", "shown_left", "choice")
_WIDE_FIELDS = (
    "criteria", "rubric_scores", "active_seconds", "worker__platform", "worker__external_id",
    "battle__instance__family__name", "battle__tournament__name", "created_at",
)


def human_judgements(*, tournaments):
    """The judgements a snapshot holds: those their tournament counts (accepted, and provisional
    where it says so)."""
    return HumanJudgement.objects.counted().filter(tournament__in=tournaments).order_by("id")


def human_preference_rows(*, tournaments, wide=False, chunk_size=None) -> Iterator[tuple]:
    """The human preference CSV's rows: one per judgement (wide: per judgement and criterion),
    a battle's judgements together, in the order they were made.

    Two server-side cursors walk in step, the judgements and their battles both in battle order,
    so memory stays flat and each battle's texts cross the wire once: the rows of one battle hold
    the very same text objects, which the CSV writer then quotes once (exports.CsvWriter)."""
    chunk_size = chunk_size or settings.EXPORT_CHUNK_ROWS
    judgements = human_judgements(tournaments=tournaments).order_by("battle_id", "id")
    images = _image_cells(judgements.values("battle__instance_id"))
    battles = (
        Battle.objects.filter(pk__in=judgements.values("battle_id")).order_by("id")
        .values_list(*_BATTLE_CELLS).iterator(chunk_size=chunk_size)
    )
    fields = _JUDGEMENT_FIELDS + (_WIDE_FIELDS if wide else ())
    pseudonyms = {}
    battle_id, instance_id, base = None, None, ()
    for values in judgements.values_list(*fields).iterator(chunk_size=chunk_size):
        judged_battle, pk, shown_left, choice = values[:4]
        while battle_id != judged_battle:
            battle = next(battles, None)
            if battle is None:
                # The battle cursor opens after the judgements' one, so it sees every battle they
                # name unless one was deleted in between.
                raise AnnotationError("A battle was deleted while its judgements were exported; "
                                      "export again.")
            battle_id, instance_id, *texts = battle
            base = (images.get(instance_id, ""), *texts)
        a_on_left = shown_left == HumanJudgement.ShownLeft.A
        if not wide:
            chose_a = (choice == "left") == a_on_left
            yield (*base, chose_a, not chose_a)
            continue
        (criteria, rubric, seconds, platform, external_id, category, tournament, created_at) = values[4:]
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
                   side_a, side, rubric.get(side_a), rubric.get(side_b), category, tournament,
                   battle_id, instance_id, pk, created_at.isoformat())


_BATTLE_FIELDS = (
    "run_id", "run__engine", "run__mode", "battle_id", "battle__instance_id",
    "battle__instance__instruction", "battle__instance__family__name", "battle__response_a__text",
    "battle__response_b__text", "battle__response_a__model_name", "battle__response_b__model_name",
    "ordering", "winner", "cot",
)


def judge_judgements(*, tournaments, include_reference=False):
    """Overall pairwise judgements of finished judge runs, grouped by run and battle."""
    judgements = JudgeJudgement.objects.counted().filter(
        run__tournament__in=tournaments, run__status=JudgeRun.Status.DONE, criterion="overall"
    ).exclude(run__mode=JudgeRun.Mode.PROMETHEUS)
    if not include_reference:
        judgements = judgements.exclude(
            Q(battle__response_a__model_name=REFERENCE_MODEL_NAME)
            | Q(battle__response_b__model_name=REFERENCE_MODEL_NAME)
        )
    return judgements.order_by("run_id", "battle_id", "ordering")


def battle_rows(*, tournaments, include_reference=False, chunk_size=None) -> Iterator[tuple]:
    """The judge battles JSONL's records: one per (judge run, battle), both orderings inside."""
    chunk_size = chunk_size or settings.EXPORT_CHUNK_ROWS
    judgements = judge_judgements(tournaments=tournaments, include_reference=include_reference)
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
    names = {JudgeJudgement.Winner.A: model_a, JudgeJudgement.Winner.B: model_b, JudgeJudgement.Winner.TIE: "tie"}
    results, cots, a_in_cot, b_in_cot = [], [], [], []
    for *_, ordering, winner, cot in group:
        results.append(names[winner])
        cots.append(cot)
        first, second = (model_a, model_b) if ordering == JudgeJudgement.Ordering.AB else (model_b, model_a)
        a_in_cot.append(first)
        b_in_cot.append(second)
    return (model_a, model_b, text_a, text_b, images.get(instance_id, ""), instruction, category,
            engine, mode == JudgeRun.Mode.REFERENCE_BACKED, results, cots, a_in_cot, b_in_cot)
