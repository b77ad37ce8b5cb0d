"""The published VisIT-Bench sheet layouts: which column means what, and how each cell is written.

Three kinds of sheet exist (the multi-image sheet, the single-image sheet, the fully annotated
example) and real releases of each differ in ways an importer must take as they come: column
names (`image_dense_caption`, `image_dense_captions`, `images_dense_captions`), extra columns
(`visual`), boolean spellings (True/False, TRUE/FALSE), line ends (LF, CRLF, with or without one
after the last row). A `Layout` is one such variant, read from a header or taken as published;
its cells are parsed into a `Content` (what the row says) and written from one, so the importer
and the exporter share one definition of every column.
"""

import re
from dataclasses import dataclass

from annotation.datasets.sheets import (
    CellError,
)

MULTI_IMAGE = "multi_image"
SINGLE_IMAGE = "single_image"
FULLY_ANNOTATED = "fully_annotated"
KIND_NAMES = {MULTI_IMAGE: "multi-image", SINGLE_IMAGE: "single-image",
              FULLY_ANNOTATED: "fully annotated"}

# Concepts, named by the column that holds them in the published sheets.
CATEGORY = "instruction_category"
IMAGES = "image"
INSTRUCTION = "instruction"
PREDICTION = "gpt4_prediction"
CAPTIONS = "image_dense_caption"
BLIP2 = "image_blip2_caption"
REFERENCE_OUTPUT = "reference_output"
CORRECT = "human_ratings_gpt4_correct"
PROBLEM_IN_CAPTION = "human_ratings_problem_in_caption"
PROBLEM_IN_GPT4 = "human_ratings_problem_in_gpt4"
METADATA = "public_images_metadata"
IS_MULTI = "is_multiple_images"
HUMAN_OUTPUT = "output_human_annotated"
RATINGS = (CORRECT, PROBLEM_IN_CAPTION, PROBLEM_IN_GPT4)
BOOLEAN_CONCEPTS = (*RATINGS, IS_MULTI)

_ALIASES = {
    CATEGORY: ("instruction_category", "category"),
    IMAGES: ("image", "images", "image_url", "image_urls"),
    INSTRUCTION: ("instruction",),
    PREDICTION: ("gpt4_prediction", "gpt-4_prediction"),
    CAPTIONS: ("image_dense_caption", "images_dense_captions", "dense_caption"),
    BLIP2: ("image_blip2_caption", "images_blip2_captions", "blip2_caption"),
    REFERENCE_OUTPUT: ("reference_output",),
    CORRECT: ("human_ratings_gpt4_correct",),
    PROBLEM_IN_CAPTION: ("human_ratings_problem_in_caption",),
    PROBLEM_IN_GPT4: ("human_ratings_problem_in_gpt4",),
    METADATA: ("public_images_metadata",),
    IS_MULTI: ("is_multiple_images", "is_multi_image"),
    HUMAN_OUTPUT: ("output_human_annotated",),
}


def _words(name):
    return [word for word in re.split(r"[\s\-_.]+", name.strip().lower()) if word]


def _singular(word):
    return {"images": "image", "captions": "caption", "urls": "url"}.get(word, word)


def normal_column_name(name):
    """A column name with case, separators and the plurals the releases disagree on folded away."""
    return "_".join(_singular(word) for word in _words(name))


_CONCEPT_BY_NAME = {normal_column_name(alias): concept
                    for concept, aliases in _ALIASES.items() for alias in aliases}


def concept_of(column):
    return _CONCEPT_BY_NAME.get(normal_column_name(column))


def names_a_list(column):
    """The multi-image sheet writes its image column in the plural and holds JSON lists there."""
    return any(word in ("images", "urls") for word in _words(column))


_REQUIRED = {
    MULTI_IMAGE: (CATEGORY, IMAGES, INSTRUCTION, PREDICTION, CAPTIONS, *RATINGS),
    SINGLE_IMAGE: (CATEGORY, IMAGES, INSTRUCTION, PREDICTION, CAPTIONS, *RATINGS),
    FULLY_ANNOTATED: (IMAGES, CAPTIONS, CATEGORY, INSTRUCTION, HUMAN_OUTPUT),
}
# The layouts as published (columns in order, booleans as written, line ends).
_PUBLISHED = {
    MULTI_IMAGE: (
        ["instruction_category", "images", "is_multiple_images", "instruction", "gpt4_prediction",
         "images_dense_captions", "images_blip2_captions", "reference_output", *RATINGS,
         "public_images_metadata"],
        ("True", "False"),
    ),
    SINGLE_IMAGE: (
        ["instruction_category", "image", "visual", "instruction", "gpt4_prediction",
         "image_dense_captions", "reference_output", *RATINGS, "public_images_metadata"],
        ("TRUE", "FALSE"),
    ),
    FULLY_ANNOTATED: (
        ["image_url", "image_dense_caption", "instruction_category", "instruction",
         "output_human_annotated"],
        ("True", "False"),
    ),
}
# The multi-image sheet pads images_dense_captions to this many entries with bare NaN tokens.
DENSE_CAPTION_SLOTS = 10


@dataclass(frozen=True)
class Content:
    """What one sheet row says, in the terms every layout shares."""

    category: str
    instruction: str
    image_urls: tuple[str, ...]
    captions: tuple[str, ...]
    blip2_captions: tuple[str, ...]
    prediction: str
    reference_output: str
    human_output: str
    metadata: dict
    correct: bool
    problem_in_caption: bool
    problem_in_response: bool

    @property
    def key(self):
        return (self.category, self.instruction, self.image_urls)

    @property
    def verified_reference(self):
        """The reference the row holds as verified: its reference_output, or, where the sheet left
        that empty, the candidate (gpt4_prediction) when it was rated correct. The published
        sheets write it so (396 rows of the single-image sheet, 21 of the multi-image one), and
        an instance verified here holds the same text in its reference_output."""
        if self.reference_output.strip():
            return self.reference_output
        return self.prediction if self.correct else ""

    def value(self, concept):
        """The value a column of `concept` carries, in the form its parser returns."""
        return {
            CATEGORY: self.category, IMAGES: self.image_urls, INSTRUCTION: self.instruction,
            PREDICTION: self.prediction, CAPTIONS: self.captions, BLIP2: self.blip2_captions,
            REFERENCE_OUTPUT: self.verified_reference, CORRECT: self.correct,
            PROBLEM_IN_CAPTION: self.problem_in_caption, PROBLEM_IN_GPT4: self.problem_in_response,
            METADATA: self.metadata, IS_MULTI: len(self.image_urls) > 1,
            HUMAN_OUTPUT: self.human_output,
        }[concept]


@dataclass(frozen=True)
class Layout:
    """One variant of a sheet kind: its columns as written and how its cells are spelled."""

    kind: str
    columns: tuple[str, ...]
    boolean_words: tuple[tuple[str, str], ...]  # per column; ("", "") for non-boolean columns
    line_terminator: str = "\n"
    ends_with_newline: bool = True

    @property
    def name(self):
        return KIND_NAMES[self.kind]

    @property
    def concepts(self):
        return tuple(concept_of(column) for column in self.columns)

    def position(self, concept):
        return next((i for i, c in enumerate(self.concepts) if c == concept), None)

    @property
    def extra_columns(self):
        return tuple(column for column, concept in zip(self.columns, self.concepts, strict=True)
                     if concept is None)

    @classmethod
    def published(cls, kind):
        columns, words = _PUBLISHED[kind]
        return cls(kind=kind, columns=tuple(columns),
                   boolean_words=tuple(words if concept_of(c) in BOOLEAN_CONCEPTS else ("", "")
                                       for c in columns))

    def with_boolean_words(self, words_by_column):
        return Layout(kind=self.kind, columns=self.columns, line_terminator=self.line_terminator,
                      ends_with_newline=self.ends_with_newline,
                      boolean_words=tuple(tuple(words_by_column.get(column, pair))
                                          for column, pair in zip(self.columns, self.boolean_words,
                                                                  strict=True)))

    def spell(self, position, value):
        true_word, false_word = self.boolean_words[position]
        return true_word if value else false_word


def detect_layout(header, imported_from):
    """The layout a header describes; raises CellError naming what is missing or doubled."""
    by_concept = {}
    for column in header:
        concept = concept_of(column)
        if concept is None:
            continue
        if concept in by_concept:
            raise CellError(f"columns “{by_concept[concept]}” and “{column}” both hold "
                            f"{concept}; keep one")
        by_concept[concept] = column
    if HUMAN_OUTPUT in by_concept and PREDICTION not in by_concept:
        kind = FULLY_ANNOTATED
    elif IMAGES in by_concept and names_a_list(by_concept[IMAGES]):
        kind = MULTI_IMAGE
    else:
        kind = SINGLE_IMAGE
    missing = [concept for concept in _REQUIRED[kind] if concept not in by_concept]
    if missing:
        published = {concept_of(c): c for c in _PUBLISHED[kind][0]}
        names = ", ".join(f"“{published.get(concept, concept)}”" for concept in missing)
        raise CellError(f"not a VisIT-Bench sheet; missing column(s) {names} of the "
                        f"{KIND_NAMES[kind]} layout")
    default = _PUBLISHED[kind][1]
    return Layout(kind=kind, columns=tuple(header),
                  boolean_words=tuple(default if concept_of(c) in BOOLEAN_CONCEPTS else ("", "")
                                      for c in header))
