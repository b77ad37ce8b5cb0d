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
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage, storages
from django.db import IntegrityError, connection, connections, transaction
from django.db.models import Max
from django.db.models.signals import m2m_changed
from django.dispatch import receiver
from django.utils import timezone

from annotation.datasets import exports, formats, streams
from annotation.datasets.manifest import (
    CARD_NAME,
    CONTENT_SUMS_NAME,
    JUDGE_REPORT_NAME,
    JUDGE_REPORT_TABLE,
    MANIFEST_NAME,
    OUTPUTS,
    build_manifest,
    dataset_card,
    snapshot_instances,
)
from annotation.exceptions import AnnotationError
from annotation.models import (
    Snapshot,
)
from crowdbench import scoping
from crowdbench.events import emit
from crowdbench.jobs import enqueue


def snapshot_storage():
    return storages["snapshots"] if "snapshots" in settings.STORAGES else default_storage


# --- requesting --------------------------------------------------------------------------------


def check_scope(*, group, tournaments):
    """A research group's snapshot holds its own families and tournaments only; a snapshot of no
    group, the tournaments of no group."""
    for tournament in tournaments:
        if group is None and tournament.group_id is not None:
            raise AnnotationError(f"“{tournament}” belongs to {tournament.group}: a snapshot of no research "
                                  "group holds tournaments of no group only. Name the group to snapshot it.")
        if group is not None and tournament.group_id != group.pk:
            raise AnnotationError(f"“{tournament}” is not a tournament of {group}, whose snapshot this is.")


def request_snapshot(*, created_by=None, tournaments=(), note="", group=None, background=True):
    """A new pending snapshot with the next version number; its build job starts on commit. A
    snapshot of a research group holds the verified instances of its families only."""
    tournaments = list(tournaments)
    check_scope(group=group, tournaments=tournaments)
    with transaction.atomic():
        snapshot = Snapshot(created_by=created_by, note=note, group=group)
        assign_version(snapshot=snapshot)
        snapshot.tournaments.set(tournaments)
    if background:
        enqueue_build(snapshot=snapshot)
    return snapshot


def assign_version(*, snapshot):
    """Number and save a new snapshot (1, 2, ...): versions are unique across research groups, so
    the next is read from every group's, not from those its maker sees (a group's first snapshot
    after another group's failed on every try). The unique version settles a race: the number is
    read again and the insert tried again, in a savepoint of its own."""
    for _ in range(5):
        with scoping.every_group("snapshot versions are numbered across research groups"):
            latest = Snapshot.objects.aggregate(latest=Max("version"))["latest"] or 0
        snapshot.version = latest + 1
        try:
            with transaction.atomic():
                snapshot.save()
        except IntegrityError:
            with scoping.every_group("snapshot versions are numbered across research groups"):
                if Snapshot.objects.filter(version=snapshot.version).exists():
                    continue  # another request took the same version between our read and our insert
            raise
        return snapshot
    raise AnnotationError("Could not allocate a snapshot version; please try again.")


def enqueue_build(*, snapshot):
    enqueue("tasks.build_snapshot", snapshot.pk)


@receiver(m2m_changed, sender=Snapshot.tournaments.through)
def _tournaments_are_frozen(sender, instance, action, **kwargs):
    if action.startswith("pre_") and isinstance(instance, Snapshot) and instance.is_frozen:
        raise AnnotationError(f"{instance} is immutable: its tournaments cannot change.")


# --- building ----------------------------------------------------------------------------------


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
    progress = _Progress(snapshot, steps=len(OUTPUTS) + 3)
    progress.update(status=Snapshot.Status.RUNNING, progress=0, error="",
                    progress_message="Starting")
    # The judge report is the leaderboard's stored result: stored now, before the read-only
    # transaction below, which can store nothing.
    _store_leaderboards(snapshot, progress)
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
    with transaction.atomic():
        Snapshot.objects.filter(pk=snapshot.pk).update(
            status=Snapshot.Status.DONE, progress=100, progress_message="Done",
            finished_at=timezone.now(), **result,
        )
        built = Snapshot.objects.get(pk=snapshot.pk)
        emit(event="snapshot.built", scope=built, key=built.pk, payload={
            "snapshot": built.pk, "version": built.version, "content_sha256": built.content_sha256,
            "files": [{"name": f["name"], "rows": f.get("rows"), "sha256": f["sha256"]} for f in built.files]})
    return built


def _write_files(snapshot, workdir, progress):
    tournaments = list(snapshot.tournaments.order_by("pk"))
    storage = snapshot_storage()
    files = []
    digests = {}

    tables = {}
    for output in OUTPUTS:
        progress.step(f"Writing {output.table.name}")
        table, rows = _rows_for(output, snapshot, tournaments, digests)
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
    progress.step("Writing the judge report")
    files.append(_write_judge_report(snapshot, tournaments, workdir / JUDGE_REPORT_NAME))
    files.sort(key=lambda entry: entry["name"])
    sums = "".join(f"{entry['sha256']}  {entry['name']}\n" for entry in files)
    content_sha256 = hashlib.sha256(sums.encode()).hexdigest()
    (workdir / CONTENT_SUMS_NAME).write_text(sums, encoding="utf-8")

    progress.step("Writing the manifest and the dataset card")
    manifest = build_manifest(snapshot=snapshot, tournaments=tournaments, files=files,
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


def _store_leaderboards(snapshot, progress):
    from annotation.scoring.freshness import refresh_leaderboard

    progress.step("Scoring the tournaments")
    for tournament in snapshot.tournaments.order_by("pk"):
        refresh_leaderboard(tournament=tournament)


def _write_judge_report(snapshot, tournaments, path):
    """The judge report of each tournament (annotation/scoring/judge_report.py)."""
    # The scientific stack loads in the worker that builds a snapshot, not in every web worker.
    from annotation.scoring.freshness import tournament_judge_report

    reports = [{"tournament": tournament.name, "tournament_id": tournament.pk, "criterion": "overall",
                "rows": tournament_judge_report(tournament=tournament)} for tournament in tournaments]
    path.write_text(json.dumps(reports, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return {"name": path.name, "path": f"{storage_prefix(snapshot)}/{path.name}", "table": JUDGE_REPORT_TABLE,
            "format": "json", "rows": sum(len(report["rows"]) for report in reports), "bytes": path.stat().st_size,
            "sha256": _file_sha256(path)}


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


def _rows_for(output, snapshot, tournaments, digests):
    """(table, rows) of one output; a sheet's rows also record each instance's digest."""
    if output.sheet_kind is not None:
        # The whole benchmark, or a group's part of it, keeps an imported layout where it can.
        table, sheet_rows = streams.sheet_export(output.sheet_kind, snapshot_instances(snapshot),
                                                 keep_imported_layout=True)

        def rows():
            for instance_id, row in sheet_rows:
                digests.setdefault(str(instance_id), hashlib.sha256(
                    json.dumps([table.name, *row], ensure_ascii=False).encode()
                ).hexdigest())
                yield row

        return table, rows()
    table = output.table
    if table is formats.HUMAN_PREFERENCES:
        return table, streams.human_preference_rows(tournaments=tournaments)
    if table is formats.HUMAN_PREFERENCES_WIDE:
        return table, streams.human_preference_rows(tournaments=tournaments, wide=True)
    return table, streams.battle_rows(tournaments=tournaments)


def _file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
