"""Reading and writing the cells of a published VisIT-Bench sheet, column by column, for the
importer and the exporter alike (the columns themselves are defined in layouts.py)."""

import json
import math
from dataclasses import replace

from annotation.datasets.layouts import (
    BLIP2,
    BOOLEAN_CONCEPTS,
    CAPTIONS,
    CATEGORY,
    CORRECT,
    DENSE_CAPTION_SLOTS,
    FULLY_ANNOTATED,
    HUMAN_OUTPUT,
    IMAGES,
    INSTRUCTION,
    IS_MULTI,
    METADATA,
    MULTI_IMAGE,
    PREDICTION,
    PROBLEM_IN_CAPTION,
    PROBLEM_IN_GPT4,
    REFERENCE_OUTPUT,
    Content,
)
from annotation.datasets.sheets import (
    MISSING,
    CellError,
    check_text,
    load_json,
    parse_boolean,
    shorten,
    strip_padding,
    without_missing,
)

# --- parsing cells ------------------------------------------------------------------------------
# Each parser takes the cell and the layout's kind and returns the value `Content.value` gives for
# its concept, or raises CellError. Text is kept as published (not stripped), so a row written
# back is the row that was read.


def _text(value, kind=None):
    if not value.strip():
        raise CellError("is empty")
    return check_text(value)


def _optional_text(value, kind=None):
    return check_text(value)


def _category(value, kind=None):
    category = _text(value).strip()
    if len(category) > 200:
        raise CellError("is longer than 200 characters")
    return category


def _looks_like_url(value):
    # URLs in the published sheets may contain spaces ("Architectural Styles/..."), so Django's
    # URLValidator would reject real data; the scheme and the stored field's length are what matter.
    return (isinstance(value, str) and value.strip().startswith(("http://", "https://"))
            and len(value.strip()) <= 1000)


def _images(value, kind):
    if kind != MULTI_IMAGE:
        if not _looks_like_url(value):
            raise CellError(f"{shorten(value)} is not an http(s) URL")
        return (value.strip(),)
    urls = strip_padding(_json_list(value, "URLs"))
    if not urls or not all(_looks_like_url(url) for url in urls):
        raise CellError("not a JSON list of URLs")
    return tuple(url.strip() for url in urls)


def _json_list(value, what):
    parsed = load_json(value)
    if not isinstance(parsed, list):
        raise CellError(f"not a JSON list of {what}")
    return parsed


def _captions(value, kind, required=True):
    if kind != MULTI_IMAGE:
        return ((_text if required else _optional_text)(value),)
    if not value.strip():
        if required:
            raise CellError("is empty")
        return ()
    captions = []
    for position, caption in enumerate(strip_padding(_json_list(value, "captions")), start=1):
        if caption is MISSING or caption is None:
            if required:
                raise CellError(f"caption {position} is NaN, between captions")
            caption = ""
        if not isinstance(caption, str):
            raise CellError(f"caption {position} is not text")
        if required and not caption.strip():
            raise CellError(f"caption {position} is empty")
        captions.append(caption)
    return tuple(captions)


def _blip2(value, kind):
    return _captions(value, kind, required=False)


def _metadata(value, kind=None):
    if not value.strip():
        return {}
    parsed = load_json(value)
    if not isinstance(parsed, dict):
        raise CellError("not a JSON object")
    # A bare NaN inside the object is pandas' "no value" (the single-image sheet has them); the
    # database's JSON type has no NaN, so it is stored as null.
    return without_missing(parsed)


def _boolean(value, kind=None):
    return parse_boolean(value)


PARSERS = {
    CATEGORY: _category, IMAGES: _images, INSTRUCTION: _text, PREDICTION: _text,
    CAPTIONS: _captions, BLIP2: _blip2, REFERENCE_OUTPUT: _optional_text, METADATA: _metadata,
    CORRECT: _boolean, PROBLEM_IN_CAPTION: _boolean, PROBLEM_IN_GPT4: _boolean,
    IS_MULTI: _boolean, HUMAN_OUTPUT: _text,
}


def parse_row(layout, cells, *, on_error):
    """The Content of a row's cells, or None after `on_error(column, message)` for each fault."""
    values = {}
    failed = False
    for column, concept, cell in zip(layout.columns, layout.concepts, cells, strict=True):
        if concept is None:
            continue
        if concept == IS_MULTI and not cell.strip():
            continue
        try:
            values[concept] = PARSERS[concept](cell, layout.kind)
        except CellError as error:
            on_error(column, str(error))
            failed = True
    if failed:
        return None
    urls = values[IMAGES]
    captions = values[CAPTIONS]
    names = dict(zip(layout.concepts, layout.columns, strict=True))
    if len(captions) != len(urls):
        on_error(names[CAPTIONS], f"{len(captions)} caption(s) for {len(urls)} image(s)")
        return None
    blip2 = values.get(BLIP2) or ("",) * len(urls)
    if len(blip2) != len(urls):
        on_error(names[BLIP2], f"{len(blip2)} caption(s) for {len(urls)} image(s)")
        return None
    if IS_MULTI in values and values[IS_MULTI] != (len(urls) > 1):
        on_error(names[IS_MULTI], f"says {values[IS_MULTI]}, but the row has {len(urls)} image(s)")
        return None
    if layout.kind == FULLY_ANNOTATED:
        output = values[HUMAN_OUTPUT]
        return Content(
            category=values[CATEGORY], instruction=values[INSTRUCTION], image_urls=urls,
            captions=captions, blip2_captions=blip2, prediction="", reference_output=output,
            human_output=output, metadata=values.get(METADATA, {}),
            # The example's outputs were written and checked by people: correct by definition.
            correct=True, problem_in_caption=False, problem_in_response=False,
        )
    reference_output = values.get(REFERENCE_OUTPUT, "")
    return Content(
        category=values[CATEGORY], instruction=values[INSTRUCTION], image_urls=urls,
        captions=captions, blip2_captions=blip2, prediction=values[PREDICTION],
        reference_output=reference_output,
        human_output=reference_output or values[PREDICTION], metadata=values.get(METADATA, {}),
        correct=values[CORRECT], problem_in_caption=values[PROBLEM_IN_CAPTION],
        problem_in_response=values[PROBLEM_IN_GPT4],
    )


def differing_columns(layout, content, other):
    """The layout's columns whose values differ between two contents."""
    return [column for column, concept in zip(layout.columns, layout.concepts, strict=True)
            if concept is not None and content.value(concept) != other.value(concept)]


# --- writing cells ------------------------------------------------------------------------------


def dense_captions_cell(captions):
    # Python's json.dumps with its defaults (", " separators, ASCII escapes), NaN for the padding.
    padding = [math.nan] * (DENSE_CAPTION_SLOTS - len(captions))
    return json.dumps([*captions, *padding])


def blip2_captions_cell(captions):
    # The published sheet writes a list of empty BLIP-2 captions without spaces: ["",""].
    if not any(captions):
        return json.dumps(list(captions), separators=(",", ":"))
    return json.dumps(list(captions))


def write_cell(layout, concept, content):
    """A cell's value written from content: a bool for boolean columns, text otherwise."""
    multi = layout.kind == MULTI_IMAGE
    if concept in BOOLEAN_CONCEPTS:
        return content.value(concept)
    # A row without an image or a caption (an instance imported without them) is written with an
    # empty cell, never a failed snapshot.
    if concept == IMAGES:
        return json.dumps(list(content.image_urls)) if multi else next(iter(content.image_urls), "")
    if concept == CAPTIONS:
        return dense_captions_cell(content.captions) if multi else next(iter(content.captions), "")
    if concept == BLIP2:
        return blip2_captions_cell(content.blip2_captions) if multi else content.blip2_captions[0]
    if concept == METADATA:
        return json.dumps(content.metadata)
    return content.value(concept)


def kept_or_written(layout, position, raw_cell, content, *, as_published=False):
    """The cell for one column: the cell as it was imported while it still says what the instance
    says (its JSON key order, spacing and NaN tokens survive, which the database's JSON type does
    not keep), else the cell written anew.

    `as_published`: the row is written back in its own sheet's layout, so an empty reference_output
    beside a candidate rated correct is kept, as the sheet's authors wrote it: read with its row,
    it names the candidate as the reference (`Content.verified_reference`). Our own layout writes
    the verified reference out in full, so a dataset user reading that column alone finds it."""
    concept = layout.concepts[position]
    if concept is None:
        return raw_cell if raw_cell is not None else ""
    if raw_cell is not None and concept not in BOOLEAN_CONCEPTS:
        try:
            parsed = PARSERS[concept](raw_cell, layout.kind)
        except CellError:
            parsed = _UNREADABLE
        if parsed == content.value(concept):
            return raw_cell
        if (as_published and concept == REFERENCE_OUTPUT and parsed is not _UNREADABLE
                and replace(content, reference_output=parsed).verified_reference
                == content.verified_reference):
            return raw_cell
    return write_cell(layout, concept, content)


_UNREADABLE = object()
