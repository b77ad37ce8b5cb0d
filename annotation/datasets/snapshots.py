"""Versioned, immutable snapshots of the benchmark and its judgements (DESIGN.md step 10).

A snapshot is requested (a row with the next version number), then built by a background job:
every export is streamed to a temporary file while its sha256 is taken, then saved through the
"snapshots" storage (local disk, or S3 through django-storages) under v<version>/. On PostgreSQL
the whole build reads one REPEATABLE READ transaction, so every file sees the same moment, while
progress goes to the admin through a second connection.
"""

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow
from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage, storages
from django.db import IntegrityError, connection, connections, transaction
from django.db.models import Count, Max, Q
from django.db.models.signals import m2m_changed
from django.dispatch import receiver
from django.utils import timezone

from annotation.collection.progress import table2
from annotation.datasets import exports, formats, layouts, streams
from annotation.exceptions import AnnotationError
from annotation.models import (
    Assignment,
    Battle,
    ImageAsset,
    Instance,
    InstructionFamily,
    JudgeRun,
    ModelResponse,
    Snapshot,
    WorkUnit,
)
from crowdbench.jobs import enqueue

CONTENT_SUMS_NAME = "SHA256SUMS"
MANIFEST_NAME = "manifest.json"
CARD_NAME = "README.md"


def snapshot_storage():
    return storages["snapshots"] if "snapshots" in settings.STORAGES else default_storage


# --- requesting --------------------------------------------------------------------------------


def request_snapshot(*, created_by=None, studies=(), note="", background=True):
    """A new pending snapshot with the next version number; its build job starts on commit."""
    studies = list(studies)
    for _ in range(5):
        try:
            with transaction.atomic():
                snapshot = Snapshot(created_by=created_by, note=note)
                assign_version(snapshot=snapshot)
                snapshot.studies.set(studies)
        except IntegrityError:
            # Another request took the same version between our read and our insert.
            continue
        if background:
            enqueue_build(snapshot=snapshot)
        return snapshot
    raise AnnotationError("Could not allocate a snapshot version; please try again.")


def assign_version(*, snapshot):
    """Number and save a new snapshot (1, 2, ...); the unique version settles any race."""
    latest = Snapshot.objects.aggregate(latest=Max("version"))["latest"] or 0
    snapshot.version = latest + 1
    snapshot.save()
    return snapshot


def enqueue_build(*, snapshot):
    enqueue("tasks.build_snapshot", snapshot.pk)


@receiver(m2m_changed, sender=Snapshot.studies.through)
def _studies_are_frozen(sender, instance, action, **kwargs):
    if action.startswith("pre_") and isinstance(instance, Snapshot) and instance.is_frozen:
        raise AnnotationError(f"{instance} is immutable: its studies cannot change.")


# --- building ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Output:
    """One export of a snapshot: which table, in which formats.

    A benchmark sheet (`sheet_kind`) is written in the layout streams.sheet_export chooses at
    build time; `table` is then its published layout, which names the file.
    """

    table: formats.Table
    formats: tuple[str, ...]  # of "csv", "spreadsheet.csv", "jsonl", "parquet"
    sheet_kind: str | None = None

    def names(self):
        return {kind: _file_name(self.table, kind) for kind in self.formats}


def _file_name(table, kind):
    if kind == "spreadsheet.csv":
        return f"spreadsheet/{table.name}.csv"
    return f"{table.name}.{kind}"


SHEET_FORMATS = ("csv", "spreadsheet.csv", "parquet")
OUTPUTS = (
    _Output(formats.SINGLE_IMAGE_SHEET, SHEET_FORMATS, layouts.SINGLE_IMAGE),
    _Output(formats.MULTI_IMAGE_SHEET, SHEET_FORMATS, layouts.MULTI_IMAGE),
    _Output(formats.FULLY_ANNOTATED_SHEET, SHEET_FORMATS, layouts.FULLY_ANNOTATED),
    _Output(formats.HUMAN_PREFERENCES, SHEET_FORMATS),
    _Output(formats.HUMAN_PREFERENCES_WIDE, SHEET_FORMATS),
    _Output(formats.BATTLES, ("jsonl", "parquet")),
)


class _Progress:
    """Progress written where the admin sees it at once, outside the build's snapshot transaction."""

    def __init__(self, snapshot, steps):
        self.snapshot = snapshot
        self.steps = steps
        self.done = 0
        self.side = None
        # Inside a caller's transaction a second connection could wait on that transaction's
        # locks, so progress then goes through the one connection.
        if connection.vendor == "postgresql" and not connection.in_atomic_block:
            self.side = connections.create_connection("default")

    def step(self, message):
        self.update(progress=min(99, 100 * self.done // self.steps), progress_message=message)
        self.done += 1

    def update(self, **fields):
        if self.side is None:
            Snapshot.objects.filter(pk=self.snapshot.pk).update(**fields)
            return
        columns = ", ".join(f"{Snapshot._meta.get_field(name).column} = %s" for name in fields)
        with self.side.cursor() as cursor:
            cursor.execute(f"UPDATE {Snapshot._meta.db_table} SET {columns} WHERE id = %s",
                           [*fields.values(), self.snapshot.pk])

    def close(self):
        if self.side is not None:
            self.side.close()


class _HashingFile:
    """A text file that also feeds what is written into a sha256."""

    def __init__(self, path):
        self.handle = open(path, "w", encoding="utf-8", newline="")  # noqa: SIM115
        self.digest = hashlib.sha256()

    def write(self, text):
        self.digest.update(text.encode("utf-8"))
        return self.handle.write(text)

    def close(self):
        self.handle.close()


def build_snapshot(*, snapshot):
    """Write every file of a requested snapshot and freeze it; a done snapshot is left as it is.

    Idempotent: a retried build overwrites the files a crashed attempt left behind.
    """
    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    if snapshot.status == Snapshot.Status.DONE:
        return snapshot
    progress = _Progress(snapshot, steps=len(OUTPUTS) + 2)
    progress.update(status=Snapshot.Status.RUNNING, progress=0, error="",
                    progress_message="Starting")
    # One moment for every file: the build's own transaction reads a single snapshot of the data.
    own_transaction = connection.vendor == "postgresql" and not connection.in_atomic_block
    try:
        with transaction.atomic(), tempfile.TemporaryDirectory(prefix="snapshot-") as workdir:
            if own_transaction:
                connection.cursor().execute(
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
                )
            result = _write_files(snapshot, Path(workdir), progress)
    except Exception as error:
        progress.update(status=Snapshot.Status.FAILED, error=f"{type(error).__name__}: {error}",
                        finished_at=timezone.now())
        progress.close()
        raise
    progress.close()
    Snapshot.objects.filter(pk=snapshot.pk).update(
        status=Snapshot.Status.DONE, progress=100, progress_message="Done",
        finished_at=timezone.now(), **result,
    )
    return Snapshot.objects.get(pk=snapshot.pk)


def _write_files(snapshot, workdir, progress):
    studies = list(snapshot.studies.order_by("pk"))
    storage = snapshot_storage()
    files = []
    digests = {}

    tables = {}
    for output in OUTPUTS:
        progress.step(f"Writing {output.table.name}")
        table, rows = _rows_for(output, studies, digests)
        tables[table.name] = table
        paths = {kind: workdir / name for kind, name in output.names().items()}
        for path in paths.values():
            path.parent.mkdir(parents=True, exist_ok=True)
        texts = {kind: _HashingFile(path) for kind, path in paths.items() if kind != "parquet"}
        try:
            count = exports.write_table(
                table, rows,
                csv_file=texts.get("csv"), spreadsheet_file=texts.get("spreadsheet.csv"),
                jsonl_file=texts.get("jsonl"), parquet_file=paths.get("parquet"),
            )
        finally:
            for handle in texts.values():
                handle.close()
        for kind, name in output.names().items():
            sha = texts[kind].digest.hexdigest() if kind in texts else _file_sha256(paths[kind])
            files.append({"name": name, "path": f"{storage_prefix(snapshot)}/{name}",
                          "table": table.name, "format": kind, "rows": count,
                          "bytes": paths[kind].stat().st_size, "sha256": sha})
    files.sort(key=lambda entry: entry["name"])
    sums = "".join(f"{entry['sha256']}  {entry['name']}\n" for entry in files)
    content_sha256 = hashlib.sha256(sums.encode()).hexdigest()
    (workdir / CONTENT_SUMS_NAME).write_text(sums, encoding="utf-8")

    progress.step("Writing the manifest and the dataset card")
    manifest = build_manifest(snapshot=snapshot, studies=studies, files=files,
                              content_sha256=content_sha256)
    (workdir / MANIFEST_NAME).write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8"
    )
    (workdir / CARD_NAME).write_text(dataset_card(manifest=manifest, tables=tables),
                                     encoding="utf-8")

    progress.step("Uploading to storage")
    names = [entry["name"] for entry in files] + [CONTENT_SUMS_NAME, MANIFEST_NAME, CARD_NAME]
    for name in names:
        stored = f"{storage_prefix(snapshot)}/{name}"
        # A retried build replaces what a failed attempt stored instead of renaming it.
        if storage.exists(stored):
            storage.delete(stored)
        with open(workdir / name, "rb") as handle:
            saved = storage.save(stored, File(handle, name=name))
        if saved != stored:
            raise AnnotationError(f"The storage saved {stored} as {saved}.")
    return {"files": files, "manifest": manifest, "content_sha256": content_sha256,
            "instance_digests": digests}


def downloadable_names(snapshot):
    """The names of a built snapshot's files, in the order the admin and the API list them: the
    data files, then the checksums, the manifest and the dataset card."""
    if snapshot.status != Snapshot.Status.DONE:
        return []
    return [entry["name"] for entry in snapshot.files if "path" in entry] + [
        CONTENT_SUMS_NAME, MANIFEST_NAME, CARD_NAME]


def open_snapshot_file(*, snapshot, name):
    """One of the snapshot's files, open for reading, for a view that has checked the reader's
    permission. Only names the snapshot lists are opened, so no path reaches the storage that
    the build did not write."""
    if name not in downloadable_names(snapshot):
        raise AnnotationError(f"{snapshot} has no file named {name!r}.")
    stored = f"{storage_prefix(snapshot)}/{name}"
    storage = snapshot_storage()
    if not storage.exists(stored):
        raise AnnotationError(f"{snapshot} lists {name} but the storage no longer holds it.")
    return storage.open(stored, "rb")


def storage_prefix(snapshot):
    return f"v{snapshot.version}"


def _rows_for(output, studies, digests):
    """(table, rows) of one output; a sheet's rows also record each instance's digest."""
    if output.sheet_kind is not None:
        table, sheet_rows = streams.sheet_export(output.sheet_kind)

        def rows():
            for instance_id, row in sheet_rows:
                digests.setdefault(str(instance_id), hashlib.sha256(
                    json.dumps([table.name, *row], ensure_ascii=False).encode()
                ).hexdigest())
                yield row

        return table, rows()
    table = output.table
    if table is formats.HUMAN_PREFERENCES:
        return table, streams.human_preference_rows(studies=studies)
    if table is formats.HUMAN_PREFERENCES_WIDE:
        return table, streams.human_preference_rows(studies=studies, wide=True)
    return table, streams.battle_rows(studies=studies)


def _file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- manifest and dataset card -----------------------------------------------------------------


def _table2_column(column):
    return {
        "references": column.references,
        "correct": column.correct,
        "problem_in_caption": column.problem_in_caption,
        "problem_in_response": column.problem_in_response,
        "correct_pct": column.correct_pct,
        "problem_in_caption_pct": column.problem_in_caption_pct,
        "problem_in_response_pct": column.problem_in_response_pct,
        "verified": column.verified,
        "ended": column.ended,
        "yield_pct": column.yield_pct,
    }


def _family_counts():
    families = {}
    for family in InstructionFamily.objects.order_by("name"):
        families[family.name] = {
            "is_multi_image": family.is_multi_image,
            "source": family.source,
            "instances": {status.value: 0 for status in Instance.Status},
            "stages": {},
        }
    names = dict(InstructionFamily.objects.values_list("pk", "name"))
    for row in Instance.objects.values("family_id", "status").annotate(n=Count("pk")).order_by():
        families[names[row["family_id"]]]["instances"][row["status"]] = row["n"]
    for row in (WorkUnit.objects.values("family_id", "stage")
                .annotate(units=Count("pk", distinct=True),
                          done=Count("pk", filter=Q(status=WorkUnit.Status.DONE), distinct=True),
                          submitted=Count("assignments", distinct=True,
                                          filter=Q(assignments__status=Assignment.Status.SUBMITTED)))
                .order_by()):
        families[names[row["family_id"]]]["stages"][row["stage"]] = {
            "units": row["units"], "units_done": row["done"], "submitted_assignments": row["submitted"],
        }
    return families


def build_manifest(*, snapshot, studies, files, content_sha256):
    published = streams.published_instances()
    exported = {entry["table"]: entry["rows"] for entry in files}
    table = table2()
    runs = JudgeRun.objects.filter(study__in=studies).select_related("study").order_by("pk")
    reformatted = (
        InstructionFamily.objects.filter(source=InstructionFamily.Source.REFORMATTED,
                                         instances__in=published)
        .distinct().order_by("source_dataset", "name")
    )
    citations = {}
    for family in reformatted:
        entry = citations.setdefault((family.source_dataset, family.citation), [])
        entry.append(family.name)
    return {
        "version": snapshot.version,
        "created_at": snapshot.created_at.isoformat(),
        "created_by": snapshot.created_by.get_username() if snapshot.created_by else None,
        "note": snapshot.note,
        "content_sha256": content_sha256,
        "content_sha256_covers": f"sha256 of {CONTENT_SUMS_NAME}: every data file's sha256 and "
                                 "name, in name order (this manifest and the card are not covered)",
        "files": files,
        "rows": exported,
        "counts": {
            "families": _family_counts(),
            "images": ImageAsset.objects.filter(instances__in=published).distinct().count(),
        },
        "table2": {name.lower(): _table2_column(column) for name, column in table.columns()},
        "studies": [
            {
                "name": study.name,
                "sampling": study.sampling,
                "image_kind": study.image_kind,
                "judgements_per_pair": study.judgements_per_pair,
                "with_criteria": study.with_criteria,
                "with_rubric": study.with_rubric,
                "seed": study.seed,
                "battles": Battle.objects.filter(study=study).count(),
                "human_judgements": streams.human_judgements(studies=[study]).count(),
            }
            for study in studies
        ],
        "models": [
            {"name": row["model_name"], "responses": row["n"]}
            for row in ModelResponse.objects.filter(
                Q(pk__in=Battle.objects.filter(study__in=studies).values("response_a"))
                | Q(pk__in=Battle.objects.filter(study__in=studies).values("response_b"))
            ).values("model_name").annotate(n=Count("pk")).order_by("model_name")
        ],
        "judges": [
            {
                "study": run.study.name,
                "engine": run.engine,
                "mode": run.mode,
                "evaluated_with_reference": run.mode == JudgeRun.Mode.REFERENCE_BACKED,
                "status": run.status,
                "use_batch_api": run.use_batch_api,
                "calls": run.total_calls,
                "fallback_calls": run.fallback_calls,
                "prompt_tokens": run.prompt_tokens,
                "completion_tokens": run.completion_tokens,
                "cost_usd": str(run.cost_usd),
            }
            for run in runs
        ],
        "judge_settings": {
            "temperature": settings.JUDGE_TEMPERATURE,
            "max_output_tokens": settings.JUDGE_MAX_OUTPUT_TOKENS,
            "fallback_model": settings.JUDGE_FALLBACK_MODEL or None,
        },
        "image_licences": exports.image_licences(instances=published),
        "citations": [
            {"source_dataset": source, "citation": citation, "families": names}
            for (source, citation), names in citations.items()
        ],
        "software": {"pyarrow": pyarrow.__version__},
    }


_LOADING = """\
```python
import pandas as pd

# keep_default_na=False keeps empty cells as "" (not NaN); JSON cells are text, as published.
multi = pd.read_csv("visit_bench_multi_images.csv", keep_default_na=False)
preferences = pd.read_parquet("human_preferences.parquet")
battles = pd.read_json("battles.jsonl", lines=True)

from datasets import load_dataset

benchmark = load_dataset("csv", data_files={{"test": "visit_bench_single_image.csv"}})
```
"""


def dataset_card(*, manifest, tables=None):
    """README.md for the snapshot: what each file and column is, and how to load them.

    `tables` (by name) are the tables as written, when a sheet kept an imported layout.
    """
    tables = tables or {}
    files_by_table = {}
    for entry in manifest["files"]:
        files_by_table.setdefault(entry["table"], []).append(entry)
    configs = []
    for output in OUTPUTS:
        name = output.table.name
        data_file = next(n for kind, n in output.names().items() if kind in ("csv", "jsonl"))
        configs.append(f"- config_name: {name}\n  data_files: {data_file}")
    lines = [
        "---",
        "license: cc-by-4.0",
        "configs:",
        *configs,
        "---",
        "",
        f"# crowdbench snapshot v{manifest['version']}",
        "",
        "The verified VisIT-Bench-style benchmark and its human and LLM-judge preferences, frozen "
        f"at {manifest['created_at']}.",
        "",
        f"Content hash (sha256 of `{CONTENT_SUMS_NAME}`): `{manifest['content_sha256']}`.",
        "Check the files with `sha256sum -c SHA256SUMS`.",
        "",
        "Worker ids never appear: workers are named by a keyed pseudonym. The `spreadsheet/` CSVs "
        "are for spreadsheet programs: a cell starting with =, +, -, @ (or their full-width forms), "
        "tab or a line break, after any leading spaces, is prefixed with an apostrophe so that it "
        "is shown rather than run. Use the other CSVs (or the Parquet files, with the same rows) "
        "for analysis.",
        "",
        "## Loading",
        "",
        _LOADING.format(),
        "## Files",
        "",
    ]
    for output in OUTPUTS:
        table = tables.get(output.table.name, output.table)
        lines += [f"### {table.title}", "", table.description, ""]
        for entry in files_by_table.get(table.name, []):
            lines.append(f"- `{entry['name']}`: {entry['rows']} rows, {entry['bytes']} bytes, "
                         f"sha256 `{entry['sha256']}`")
        lines += ["", "| column | type | meaning |", "| --- | --- | --- |"]
        for column in table.columns:
            meaning = column.description.replace("|", "\\|")
            lines.append(f"| `{column.name}` | {column.type} | {meaning} |")
        lines.append("")
    lines += ["## Table 2 (verification)", "", "| | overall | single | multi |", "| --- | --- | --- | --- |"]
    t2 = manifest["table2"]
    for label, key in (("GPT-4 correct (%)", "correct_pct"),
                       ("Problem in caption (%)", "problem_in_caption_pct"),
                       ("Problem in GPT-4 (%)", "problem_in_response_pct"),
                       ("References rated", "references")):
        cells = [_number(t2[column][key]) for column in ("overall", "single", "multi")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "## Image licences", ""]
    for entry in manifest["image_licences"]:
        lines.append(f"- {entry['licence'] or 'not recorded'}: {entry['images']} image(s)"
                     + (f" ({entry['licence_url']})" if entry["licence_url"] else ""))
    if manifest["citations"]:
        lines += ["", "## Reformatted datasets: please cite", ""]
        for entry in manifest["citations"]:
            lines.append(f"- {entry['source_dataset']} ({', '.join(entry['families'])})")
            if entry["citation"]:
                lines += ["", "```", entry["citation"], "```", ""]
    return "\n".join(lines) + "\n"


def _number(value):
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


# --- diff --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotDiff:
    old: Snapshot | None
    new: Snapshot
    added: tuple[int, ...]
    removed: tuple[int, ...]
    changed: tuple[int, ...]

    def summary(self):
        against = f"v{self.old.version}" if self.old else "nothing"
        return (f"v{self.new.version} against {against}: {len(self.added)} instance(s) added, "
                f"{len(self.removed)} removed, {len(self.changed)} changed.")


def previous_snapshot(snapshot):
    return (Snapshot.objects.filter(status=Snapshot.Status.DONE, version__lt=snapshot.version)
            .order_by("-version").first())


def diff_snapshots(*, new, old=None):
    """Instances added, removed and changed (any exported cell) between two done snapshots."""
    for snapshot in (new, old):
        if snapshot is not None and snapshot.status != Snapshot.Status.DONE:
            raise AnnotationError(f"{snapshot} is not done ({snapshot.get_status_display()}).")
    old = old if old is not None else previous_snapshot(new)
    before = old.instance_digests if old else {}
    after = new.instance_digests

    def ids(keys):
        return tuple(sorted(int(key) for key in keys))

    return SnapshotDiff(
        old=old, new=new,
        added=ids(after.keys() - before.keys()),
        removed=ids(before.keys() - after.keys()),
        changed=ids(key for key in after.keys() & before.keys() if after[key] != before[key]),
    )
