"""What a snapshot says about itself: its manifest (versions, counts, Table 2, file digests), the
dataset card a `datasets` or pandas user reads first, and what changed since the previous one."""

import json
import re
from dataclasses import dataclass
from importlib.metadata import version

from django.conf import settings
from django.db.models import Count, Q

from annotation.collection.progress import table2
from annotation.datasets import formats, layouts, licences, streams
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
    Stage,
    StageConfig,
    WorkUnit,
)
from annotation.models.benchmark import benchmark_instances

CONTENT_SUMS_NAME = "SHA256SUMS"
MANIFEST_NAME = "manifest.json"
CARD_NAME = "README.md"
JUDGE_REPORT_NAME = "judge_report.json"
JUDGE_REPORT_TABLE = "judge_report"


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


def snapshot_instances(snapshot):
    """The benchmark's instances a snapshot holds: its research group's, or for a snapshot of no
    group (made by staff outside groups, or by a superuser naming none), those no group owns, so
    that whoever may view it is shown no group's rows."""
    if snapshot.group is None:
        return benchmark_instances().filter(family__group__isnull=True)
    return benchmark_instances(group=snapshot.group)


def _family_counts(group):
    owned = InstructionFamily.objects.filter(group=group)
    families = {}
    for family in owned.order_by("name"):
        families[family.name] = {
            "is_multi_image": family.is_multi_image,
            "source": family.source,
            "instances": {status.value: 0 for status in Instance.Status},
            "stages": {},
        }
    names = dict(owned.values_list("pk", "name"))
    for row in (Instance.objects.filter(family__in=owned).values("family_id", "status").annotate(n=Count("pk"))
                .order_by()):
        families[names[row["family_id"]]]["instances"][row["status"]] = row["n"]
    for row in (WorkUnit.objects.filter(family__in=owned).values("family_id", "stage")
                .annotate(units=Count("pk", distinct=True),
                          done=Count("pk", filter=Q(status=WorkUnit.Status.DONE), distinct=True),
                          submitted=Count("assignments", distinct=True,
                                          filter=Q(assignments__status=Assignment.Status.SUBMITTED)))
                .order_by()):
        families[names[row["family_id"]]]["stages"][row["stage"]] = {
            "units": row["units"], "units_done": row["done"], "submitted_assignments": row["submitted"],
        }
    return families


def build_manifest(*, snapshot, tournaments, files, content_sha256):
    published = snapshot_instances(snapshot)
    exported = {entry["table"]: entry["rows"] for entry in files}
    # The snapshot's group's families, or for a snapshot of no group those no group owns, as
    # `snapshot_instances` holds them.
    # Read in the build's read-only transaction, where Table 2's kept counts are not written.
    table = table2(families=InstructionFamily.objects.filter(group=snapshot.group), keep=False)
    image_licences = licences.image_licences(instances=published)
    runs = JudgeRun.objects.filter(tournament__in=tournaments).select_related("tournament").order_by("pk")
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
        # Whose rows it holds: a group's, or (null) only rows no group owns. A manifest without
        # the key is of a snapshot built before that rule (annotation/datasets/downloads.py).
        "research_group": snapshot.group.name if snapshot.group else None,
        "content_sha256": content_sha256,
        "content_sha256_covers": f"sha256 of {CONTENT_SUMS_NAME}: every data file's sha256 and "
                                 "name, in name order (this manifest and the card are not covered)",
        "files": files,
        "rows": exported,
        "counts": {
            "families": _family_counts(snapshot.group),
            "images": ImageAsset.objects.filter(instances__in=published).distinct().count(),
        },
        "table2": {name.lower(): _table2_column(column) for name, column in table.columns()},
        # Verification decisions (and so the verified sheets and Table 2) count these work states.
        "verification_work_states": _verification_work_states(),
        "tournaments": [
            {
                "name": tournament.name,
                "sampling": tournament.sampling,
                "image_kind": tournament.image_kind,
                "judgements_per_pair": tournament.judgements_per_pair,
                "with_criteria": tournament.with_criteria,
                "with_rubric": tournament.with_rubric,
                "seed": tournament.seed,
                "battles": Battle.objects.filter(tournament=tournament).count(),
                "human_judgements": streams.human_judgements(tournaments=[tournament]).count(),
                # Which work states its human judgements hold (annotation/crowdwork/review.py).
                "work_states": ["accepted", "provisional"] if tournament.counts_provisional else ["accepted"],
            }
            for tournament in tournaments
        ],
        "models": [
            {"name": row["model_name"], "responses": row["n"]}
            for row in ModelResponse.objects.filter(
                Q(pk__in=Battle.objects.filter(tournament__in=tournaments).values("response_a"))
                | Q(pk__in=Battle.objects.filter(tournament__in=tournaments).values("response_b"))
            ).values("model_name").annotate(n=Count("pk")).order_by("model_name")
        ],
        "judges": [
            {
                "tournament": run.tournament.name,
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
        "image_licences": image_licences,
        # What the dataset card declares: the Hub's identifier for the images' licences.
        "hub_licence": licences.card_licence(image_licences),
        "image_attributions": licences.image_attributions(instances=published,
                                                          image_url=streams._image_url),
        "citations": [
            {"source_dataset": source, "citation": citation, "families": names}
            for (source, citation), names in citations.items()
        ],
        "software": {"pyarrow": version("pyarrow")},
    }


_LOADING = """\
```python
from datasets import load_dataset

# One config per table with rows (the front matter above lists them), read from its Parquet file;
# once pushed to the Hub, give the repository ("owner/name") instead of the folder.
benchmark = load_dataset("path/to/this/folder", "visit_bench_single_image", split="test")
battles = load_dataset("path/to/this/folder", "battles", split="test")

import pandas as pd

# keep_default_na=False keeps empty cells as "" (not NaN); JSON cells are text, as published.
multi = pd.read_csv("visit_bench_multi_images.csv", keep_default_na=False)
preferences = pd.read_parquet("human_preferences.parquet")
```
"""

# The split every config has: the benchmark is a test set (paper §1), and its judgements with it.
SPLIT = "test"
DEFAULT_CONFIG = formats.SINGLE_IMAGE_SHEET.name
# Our Arrow type names (formats.py) as the `datasets` features the card declares for them.
_FEATURES = {
    "bool": ("dtype", "bool"),
    "string": ("dtype", "string"),
    "int64": ("dtype", "int64"),
    "double": ("dtype", "float64"),
    "list<item: string>": ("list", "string"),
}


def _yaml_text(value):
    # A JSON string is a YAML double-quoted scalar: any column name or licence name is safe in it.
    return json.dumps(value, ensure_ascii=False)


def _front_matter(*, manifest, tables, rows):
    """The card's YAML: its licence (licences.py) and, per table with rows, a config and its
    features, so `datasets.load_dataset(<folder>, <config>)` reads the Parquet file with the
    declared types. `datasets` cannot load a split without rows, so an empty table (no tournament
    yet, no multi-image instance) has no config: asking for it names the configs there are."""
    lines = ["---", f"license: {manifest['hub_licence']}"]
    if manifest["hub_licence"] == licences.OTHER:
        named = {entry["licence"] or entry["licence_url"] for entry in manifest["image_licences"]}
        name = named.pop() if len(named) == 1 else "mixed image licences"
        lines.append(f"license_name: {_yaml_text(re.sub(r'[^a-z0-9.]+', '-', name.lower()).strip('-'))}")
        links = {entry["licence_url"] for entry in manifest["image_licences"]}
        if len(links) == 1 and links != {""}:
            lines.append(f"license_link: {_yaml_text(links.pop())}")
    lines.append(f"pretty_name: {_yaml_text('crowdbench snapshot v' + str(manifest['version']))}")
    declared = [output for output in OUTPUTS if rows.get(output.table.name)]
    if not declared:
        return lines + ["---"]
    lines.append("configs:")
    for output in declared:
        name = output.table.name
        lines += [f"- config_name: {name}", "  data_files:", f"  - split: {SPLIT}",
                  f"    path: {_yaml_text(output.names()['parquet'])}"]
        if name == DEFAULT_CONFIG:
            lines.append("  default: true")
    lines.append("dataset_info:")
    for output in declared:
        table = tables.get(output.table.name, output.table)
        lines += [f"- config_name: {table.name}", "  features:"]
        for column in table.columns:
            key, value = _FEATURES[column.type]
            lines += [f"  - name: {_yaml_text(column.name)}", f"    {key}: {value}"]
    return lines + ["---"]


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _declared_because(manifest):
    identifier = manifest["hub_licence"]
    if identifier == licences.UNKNOWN:
        return "`unknown`: no image has its licence recorded."
    if identifier != licences.OTHER:
        return f"`{identifier}`: every image is under it."
    if len(manifest["image_licences"]) > 1:
        return "`other`, because the images' licences differ (below)."
    return "`other`, because the Hub has no identifier for the images' licence (below)."


def _licence_section(manifest):
    lines = ["## Image licences", "",
             "Each image keeps its own licence; the sheets' `public_images_metadata` carries it per "
             "instance. The card's `license` is the Hub's identifier for them: "
             + _declared_because(manifest),
             "", "| licence | Hub identifier | images |", "| --- | --- | --- |"]
    for entry in manifest["image_licences"]:
        name = _cell(entry["licence"] or entry["licence_url"] or "not recorded")
        if entry["licence_url"]:
            name = f"[{name}](<{_cell(entry['licence_url'])}>)"
        lines.append(f"| {name} | `{entry['hub_licence']}` | {entry['images']} |")
    if manifest["image_attributions"]:
        lines += ["", "### Attribution", "",
                  "Images whose licence asks that the author be named:", "",
                  "| image | author | source | licence |", "| --- | --- | --- | --- |"]
        for entry in manifest["image_attributions"]:
            lines.append(f"| {_cell(entry['image'])} | {_cell(entry['author'] or 'not recorded')} | "
                         f"{_cell(entry['source'] or '-')} | {_cell(entry['licence'] or entry['licence_url'])} |")
    return lines


def _verification_work_states():
    counting = {
        name: ["accepted", "provisional"] if counts_provisional else ["accepted"]
        for name, counts_provisional in StageConfig.objects.filter(stage=Stage.VERIFICATION)
        .values_list("family__name", "counts_provisional").order_by("family__name")
    }
    return {"by_family": counting, "default": ["accepted", "provisional"]}


def dataset_card(*, manifest, tables=None):
    """README.md for the snapshot: what each file and column is, and how to load them.

    `tables` (by name) are the tables as written, when a sheet kept an imported layout.
    """
    tables = tables or {}
    files_by_table = {}
    for entry in manifest["files"]:
        files_by_table.setdefault(entry["table"], []).append(entry)
    lines = [
        *_front_matter(manifest=manifest, tables=tables, rows=manifest["rows"]),
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
    for entry in files_by_table.get(JUDGE_REPORT_TABLE, []):
        lines += ["### Judge report", "",
                  "Per tournament, every finished LLM judge run beside the crowd, as the leaderboard's judge "
                  "report shows it (overall criterion): the run's engine, mode, prompts_sha256 and cost_usd; "
                  "position bias (first_position_wins, flips when the two answers swap places), length bias "
                  "(longer_wins, and bins by tokens longer), self_preference where the judge model is also a "
                  "contestant, agreement with the crowd majority by strength, kappa_by_category and the "
                  "spearman of its Elo with the crowd's. Each rate is {rate, lower, upper, n} with a 95% "
                  "Wilson interval.", "",
                  f"- `{entry['name']}`: {entry['rows']} rows, {entry['bytes']} bytes, sha256 `{entry['sha256']}`",
                  ""]
    lines += ["## Table 2 (verification)", "", "| | overall | single | multi |", "| --- | --- | --- | --- |"]
    t2 = manifest["table2"]
    for label, key in (("GPT-4 correct (%)", "correct_pct"),
                       ("Problem in caption (%)", "problem_in_caption_pct"),
                       ("Problem in GPT-4 (%)", "problem_in_response_pct"),
                       ("References rated", "references")):
        cells = [_number(t2[column][key]) for column in ("overall", "single", "multi")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", *_licence_section(manifest)]
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
