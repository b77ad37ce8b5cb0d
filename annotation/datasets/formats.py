"""The published VisIT-Bench file formats, each described once (`Table`: file name, columns with
their Arrow types and meanings): the three benchmark sheets, the human preference CSVs and the
judge's battles."""

from dataclasses import dataclass

from annotation.datasets import layouts
from annotation.models import (
    CHIRP_CRITERIA,
    REFERENCE_MODEL_NAME,
)

STABLE_KEY_COLUMN = "instance_id"
# Arrow types by the name Arrow prints for them (the data card shows that name). The types are made
# only when a schema is asked for: importing pyarrow costs every web worker memory it never uses.
_ARROW_TYPES = {
    "bool": lambda pa: pa.bool_(),
    "string": lambda pa: pa.string(),
    "int64": lambda pa: pa.int64(),
    "double": lambda pa: pa.float64(),
    "list<item: string>": lambda pa: pa.list_(pa.string()),
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str

    def __post_init__(self):
        if self.type not in _ARROW_TYPES:
            raise ValueError(f"column {self.name}: no Arrow type is named {self.type!r}")

    def arrow_type(self):
        import pyarrow

        return _ARROW_TYPES[self.type](pyarrow)


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
        import pyarrow

        return pyarrow.schema([pyarrow.field(column.name, column.arrow_type())
                               for column in self.columns])


_RATINGS = (
    Column("human_ratings_gpt4_correct", "bool",
           "Verification: the crowd judged the candidate reference (gpt4_prediction) correct."),
    Column("human_ratings_problem_in_caption", "bool",
           "Verification: when incorrect, the problem was in the instruction-conditioned caption."),
    Column("human_ratings_problem_in_gpt4", "bool",
           "Verification: when incorrect, the problem was in the model's response."),
)
_CATEGORY = Column("instruction_category", "string", "The instruction family.")
_INSTRUCTION = Column("instruction", "string", "The instruction, as written.")

_MEANINGS = {
    layouts.CATEGORY: "The instruction family.",
    layouts.INSTRUCTION: "The instruction, as written.",
    layouts.IS_MULTI: "True when the instance has several images.",
    layouts.PREDICTION: "The candidate reference a model wrote from the caption (paper §2.1); empty "
                        "when the reference was written by people.",
    layouts.REFERENCE_OUTPUT: "The human-verified reference: the human-written one a published sheet "
                              "gave, else the candidate (gpt4_prediction) verified correct. A "
                              "published sheet written back in its own layout leaves it empty where "
                              "its authors did: beside a candidate rated correct, which is then the "
                              "reference.",
    layouts.METADATA: "JSON object of public image metadata: as published for imported rows; for "
                      "instances made here, each image's License (URL), LicenseName, Author and "
                      "OriginalLandingURL (its source page), one object for a "
                      "single image, {\"images\": [one per image]} for several.",
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
            kind = "bool"
        else:
            kind = "string"
        meaning = (_MEANINGS_BY_KIND[layout.kind].get(concept) or _MEANINGS.get(concept)
                   or "Kept as the imported sheet wrote it; empty for instances made here.")
        columns.append(Column(column, kind, meaning))
    if stable_key:
        columns.append(Column(STABLE_KEY_COLUMN, "int64",
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
    Column("image_url", "string",
           "The image URL; a JSON list of URLs for a multi-image instance."),
    _INSTRUCTION,
    Column("A", "string", "The response of A_model."),
    Column("B", "string", "The response of B_model."),
    Column("A_model", "string", "The model that wrote A (the verified reference is "
                                   f"“{REFERENCE_MODEL_NAME}”)."),
    Column("B_model", "string", "The model that wrote B."),
    Column("model_selection.A", "bool", "The worker preferred A."),
    Column("model_selection.B", "bool", "The worker preferred B."),
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
                "criteria when the tournament asked them): the published columns, then more.",
    columns=(
        *_PREFERENCE_COLUMNS,
        Column("criterion", "string", f"The criterion judged: one of {', '.join(CHIRP_CRITERIA)}."),
        Column("worker", "string", "The worker's pseudonym (a keyed hash; never the platform id)."),
        Column("time_taken_seconds", "double", "Seconds the worker was active on the page."),
        Column("side_shown_A", "string", "Where A was shown: left (Response 1) or right."),
        Column("side_chosen", "string", "The side the worker picked: left or right."),
        Column("rubric_score.A", "int64", "1-5 rubric score of A, when the tournament asked one."),
        Column("rubric_score.B", "int64", "1-5 rubric score of B, when the tournament asked one."),
        _CATEGORY,
        Column("tournament", "string", "The tournament."),
        Column("battle_id", "int64", "The battle (instance, A, B)."),
        Column("instance_id", "int64", "The instance."),
        Column("judgement_id", "int64", "The judgement."),
        Column("submitted_at", "string", "When the judgement was stored (ISO 8601, UTC)."),
    ),
)
_LIST = "list<item: string>"
BATTLES = Table(
    name="battles",
    title="LLM judge battles",
    description="One line per battle and judge, as the VisIT-Bench leaderboard publishes them: "
                "each battle is asked in both orderings (A first, then B first). Battles against "
                "the verified reference are left out, as published, to limit test-set leakage.",
    columns=(
        Column("A_model", "string", "Which model wrote A."),
        Column("B_model", "string", "Which model wrote B."),
        Column("A", "string", "The prediction of A_model."),
        Column("B", "string", "The prediction of B_model."),
        Column("image_url", "string", "The image URL; a JSON list for several images."),
        _INSTRUCTION,
        _CATEGORY,
        Column("engine", "string", "The judge model."),
        Column("evaluated_with_reference", "bool",
               "The judge was shown the human-verified reference."),
        Column("auto_evaluation_result", _LIST,
               "The winner of each of the two queries: a model name, or tie."),
        Column("auto_evaluation_cot", _LIST, "The judge's chain of thought in each query."),
        Column("A_model_in_cot", _LIST, "The model called Response A in each chain of thought."),
        Column("B_model_in_cot", _LIST, "The model called Response B in each chain of thought."),
    ),
)
