"""Models' predictions (the VisIT-Bench `predictions.csv`, paper §4): each row matched to an
instance by its stable key or any form of its image addresses, every problem named by row and
column, and the good rows importable on their own."""

import ast
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from django.db import transaction
from django.db.models import Prefetch

from annotation.datasets import layouts
from annotation.datasets.formats import STABLE_KEY_COLUMN
from annotation.datasets.layouts import concept_of, normal_column_name
from annotation.datasets.sheets import (
    CellError,
    Problems,
    cell_label,
    check_text,
    load_json,
    read_sheet,
    shorten,
    strip_padding,
)
from annotation.exceptions import AnnotationError
from annotation.models import (
    REFERENCE_MODEL_NAME,
    Instance,
    InstanceImage,
    ModelResponse,
)

PREDICTION_SUFFIX = " prediction"


@dataclass(frozen=True)
class PredictionsImportResult:
    imported_from: str
    created: int
    unchanged: int
    models: tuple[str, ...]
    notes: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()  # the problems of the predictions not imported (only_good)

    def summary(self):
        text = (
            f"{self.created} prediction(s) imported, {self.unchanged} already there, "
            f"from {len(self.models)} model(s): {', '.join(self.models)}."
        )
        if self.left_out:
            text += f" Left out as asked: {len(self.left_out)} prediction(s) with a problem."
        if self.notes:
            text += " " + " ".join(self.notes)
        return text


class PredictionsProblems(AnnotationError):
    """Some predictions cannot be imported; `good` others can, with only_good=True."""

    def __init__(self, message, *, good, problems):
        super().__init__(message)
        self.good = good
        self.problems = problems


@dataclass
class _Planned:
    number: int
    column: str
    instance: Instance
    model_name: str
    text: str


def import_predictions(*, path_or_file, only_good=False, model_name=""):
    """Import a predictions.csv: a row per instance, a `<model name> prediction` column per model.

    `model_name`, when given, names the model of a file with one prediction column whatever that
    column calls it: the authors' `minigpt-4.csv` and `minigpt-4_13b.csv` both say "MiniGPT-4
    prediction", and only a name given here lets the two sit side by side.

    A row is matched to its instance by the stable key `instance_id` that every sheet this
    platform exports in its own layout carries, else by instruction and image(s): an image URL, or
    for an uploaded image its address in any form (absolute media URL, /media/... path, the
    image_url an export wrote); instruction_category settles a tie. Every row is checked first
    and each problem (unmatched, empty, duplicated or conflicting prediction) is reported by row
    and column. With any problem nothing is imported, unless `only_good`: then the predictions
    that are fine are imported and the others left out. Importing the same file twice changes
    nothing. A row repeating an earlier row's prediction for the same instance is skipped and
    reported; a different prediction for it is a problem naming both rows (the earlier one is fine).
    """
    problems = Problems()
    sheet = read_sheet(path_or_file, what="predictions.csv", problems=problems)
    imported_from = sheet.name
    columns = _predictions_columns(sheet.header, imported_from, model_name=model_name.strip())
    models = columns.models
    index = _InstanceIndex() if columns.image else None
    first_row = {}  # (instance id, model name) -> (row number, text)
    notes, planned = [], []
    bad_rows = problems.total
    for row in sheet.rows:
        cells = dict(zip(sheet.header, row.cells, strict=True))
        instance = _match(row, cells, columns, index, problems)
        if instance is None:
            continue
        for column, model_name in models.items():
            text = cells[column].strip()
            label = cell_label(row.label, column)
            if not text:
                problems.add(f"{label}: is empty")
                continue
            earlier = first_row.setdefault((instance.pk, model_name), (row.number, text))
            if earlier[0] == row.number:
                planned.append(_Planned(row.number, column, instance, model_name, text))
            elif earlier[1] == text:
                notes.append(f"Row {row.number} repeats row {earlier[0]}'s {model_name} prediction "
                             f"for instance #{instance.pk} and was skipped.")
            else:
                problems.add(f"{label}: a second {model_name} prediction for instance #{instance.pk}, "
                             f"different from row {earlier[0]}'s; keep one of the two rows")

    existing = {
        (response.instance_id, response.model_name): response.text
        for response in ModelResponse.objects.filter(
            instance_id__in={p.instance.pk for p in planned}, model_name__in=models.values()
        )
    }
    to_create, unchanged = [], 0
    for plan in planned:
        before = existing.get((plan.instance.pk, plan.model_name))
        if before is None:
            to_create.append(ModelResponse(instance=plan.instance, model_name=plan.model_name,
                                           text=plan.text, imported_from=imported_from))
        elif before == plan.text:
            unchanged += 1
        else:
            problems.add(
                f'row {plan.number}, column "{plan.column}": instance #{plan.instance.pk} already '
                f"has a different prediction from {plan.model_name}; delete it first to replace it"
            )
    if not sheet.rows and not bad_rows:
        raise AnnotationError(f"{imported_from} has a header but no rows.")
    if problems.total and not (only_good and to_create):
        good = len(to_create)
        lines = [f"{imported_from}: {problems.total} problem(s) found; nothing was imported.",
                 *problems.lines()]
        if good:
            lines.append(f"{good} prediction(s) are fine and can be imported without the others.")
        raise PredictionsProblems("\n".join(lines), good=good, problems=tuple(problems.lines()))
    with transaction.atomic():
        ModelResponse.objects.bulk_create(to_create)
    return PredictionsImportResult(
        imported_from=imported_from, created=len(to_create), unchanged=unchanged,
        models=tuple(sorted(models.values())), notes=tuple(notes),
        left_out=tuple(problems.lines()) if problems.total else (),
    )


@dataclass(frozen=True)
class _PredictionsColumns:
    instance_id: str | None
    instruction: str | None
    category: str | None
    image: str | None
    models: dict


def _predictions_columns(header, imported_from, *, model_name=""):
    where = f"{imported_from}, row 1 (header)"
    by_name = {}
    for column in header:
        name = normal_column_name(column)
        if name == STABLE_KEY_COLUMN:
            by_name.setdefault("instance_id", column)
        elif concept_of(column) in (layouts.INSTRUCTION, layouts.CATEGORY, layouts.IMAGES):
            by_name.setdefault(concept_of(column), column)
    models = {}
    for column in header:
        if column.lower().endswith(PREDICTION_SUFFIX) and column[: -len(PREDICTION_SUFFIX)].strip():
            models[column] = column[: -len(PREDICTION_SUFFIX)].strip()
    if not models:
        raise AnnotationError(f"{where}: no “<model name> prediction” column.")
    if model_name:
        if len(models) > 1:
            raise AnnotationError(
                f"{where}: a model name was given, but the file has {len(models)} prediction columns ("
                + ", ".join(f"“{column}”" for column in models)
                + "); give a name only for a file with one, or rename the columns instead.")
        if len(model_name) > ModelResponse._meta.get_field("model_name").max_length:
            raise AnnotationError(f"The model name “{shorten(model_name)}” is longer than 200 characters.")
        models = {column: model_name for column in models}
    if REFERENCE_MODEL_NAME in models.values():
        raise AnnotationError(
            f"{where}: “{REFERENCE_MODEL_NAME}” is the verified reference's name; please rename "
            "that model."
        )
    columns = _PredictionsColumns(
        instance_id=by_name.get("instance_id"), instruction=by_name.get(layouts.INSTRUCTION),
        category=by_name.get(layouts.CATEGORY), image=by_name.get(layouts.IMAGES), models=models,
    )
    if columns.instance_id is None and (columns.instruction is None or columns.image is None):
        missing = [f"“{name}”" for name, have in (("instruction", columns.instruction),
                                                  ("image", columns.image)) if have is None]
        raise AnnotationError(
            f"{where}: missing column(s) {', '.join(missing)}. Rows are matched by the "
            f"“{STABLE_KEY_COLUMN}” column that every sheet exported from this platform carries, "
            "or by instruction and image (“images” for several)."
        )
    return columns


def _match(row, cells, columns, index, problems):
    """The instance a row is for, or None after reporting why not."""
    key = cells[columns.instance_id].strip() if columns.instance_id else ""
    if key:
        return _match_by_key(row, cells, columns, key, problems)
    if columns.image is None:
        problems.add(f"{cell_label(row.label, columns.instance_id)}: is empty, and the file has "
                     "no image column to match the row by instead")
        return None
    instruction = cells[columns.instruction].strip()
    try:
        addresses = _image_addresses(cells[columns.image])
    except CellError as error:
        problems.add(f"{cell_label(row.label, columns.image)}: {error}")
        return None
    identities = tuple(index.identity(address) for address in addresses)
    candidates = index.instances.get((instruction, identities), [])
    if len(candidates) > 1 and columns.category:
        category = cells[columns.category].strip()
        candidates = [i for i in candidates if i.family.name == category]
    if not candidates:
        looked_for = "; ".join(index.describe(address, identity)
                               for address, identity in zip(addresses, identities, strict=True))
        problems.add(
            f"{row.label}: no instance has the instruction {shorten(instruction)} with {looked_for}. "
            f"Give the “{STABLE_KEY_COLUMN}” column of a sheet exported from this platform to "
            "match rows by key."
        )
        return None
    if len(candidates) > 1:
        problems.add(f"{row.label}: matches instances "
                     + ", ".join(f"#{i.pk}" for i in candidates)
                     + f"; give the “{STABLE_KEY_COLUMN}” column to say which")
        return None
    return candidates[0]


def _match_by_key(row, cells, columns, key, problems):
    label = cell_label(row.label, columns.instance_id)
    if not key.isdigit() or len(key) > 18:
        problems.add(f"{label}: {shorten(key)} is not an instance id")
        return None
    instance = Instance.objects.select_related("family").filter(pk=int(key)).first()
    if instance is None:
        problems.add(f"{label}: there is no instance #{key}")
        return None
    if columns.instruction and cells[columns.instruction].strip() != instance.instruction.strip():
        problems.add(f"{cell_label(row.label, columns.instruction)}: instance #{key} has another "
                     "instruction; is this row's instance_id right?")
        return None
    return instance


_PY_STRING = r"""(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")"""
_PYTHON_STRING_LIST = re.compile(rf"\[\s*{_PY_STRING}(?:\s*,\s*{_PY_STRING})*\s*,?\s*\]")
_JSON_STRING_LIST = re.compile(r'\[\s*"(?:[^"\\]|\\.)*"(?:\s*,\s*"(?:[^"\\]|\\.)*")*\s*\]')


def _image_addresses(value):
    """The image address(es) of a cell: one address, or a list (JSON, or Python's repr of one)."""
    value = value.strip()
    if not value:
        raise CellError("is empty")
    if not value.startswith("["):
        return (value,)
    if _PYTHON_STRING_LIST.fullmatch(value) and not _JSON_STRING_LIST.fullmatch(value):
        # Sheets written from pandas hold Python list literals ('...') rather than JSON; only a
        # flat list of string literals reaches literal_eval, so it cannot recurse or compute.
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError):
            raise CellError("not an image address or a list of them") from None
    else:
        parsed = load_json(value)
    parsed = strip_padding(parsed) if isinstance(parsed, list) else parsed
    if (not isinstance(parsed, list) or not parsed
            or not all(isinstance(url, str) and url.strip() for url in parsed)):
        raise CellError("not an image address or a list of them")
    for url in parsed:
        check_text(url)
    return tuple(url.strip() for url in parsed)


class _InstanceIndex:
    """Instances by (instruction, image identities); an image is its URL, or for an uploaded
    image the name it is stored under, whichever form of its address a sheet gives."""

    def __init__(self):
        self.instances = {}
        self.known = set()
        links = InstanceImage.objects.select_related("image").order_by("position")
        instances = Instance.objects.select_related("family").prefetch_related(
            Prefetch("instanceimage_set", queryset=links))
        for instance in instances.iterator(chunk_size=2000):
            identities = tuple(_stored_identity(link.image) for link in instance.instanceimage_set.all())
            self.known.update(identities)
            self.instances.setdefault((instance.instruction.strip(), identities), []).append(instance)

    def identity(self, address):
        if ("url", address) in self.known:
            return ("url", address)
        parts = unquote(urlsplit(address).path).strip("/").split("/")
        for start in range(len(parts)):
            candidate = ("file", "/".join(parts[start:]))
            if candidate in self.known:
                return candidate
        return ("url", address)

    def describe(self, address, identity):
        if identity[0] == "file":
            return f"the image {shorten(address, 80)} (read as the uploaded file {identity[1]})"
        return f"the image {shorten(address, 80)} (no stored image has this address)"


def _stored_identity(image):
    return ("url", image.url.strip()) if image.url else ("file", image.file.name)
