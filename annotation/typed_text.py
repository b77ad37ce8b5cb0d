"""Text a person typed into one of our pages: how long it may be, and which characters it may hold.

Every typed field is checked here before it reaches the database, so a worker who pastes a NUL
(PostgreSQL refuses it in text) or a megabyte of text gets a message on the form rather than a
server error, and the next worker is never shown a 5 MB caption. The caps are stated on the pages.
"""

import re

from annotation.exceptions import AnnotationError

# Far above anything the paper's instructions and captions need (most are a few hundred
# characters), far below what would burden the next worker's page or an export.
INSTRUCTION_MAX_CHARS = 2_000
CAPTION_MAX_CHARS = 5_000
COMMENT_MAX_CHARS = 2_000
ANSWER_MAX_CHARS = 2_000

# C0 and C1 control characters and DEL; tab and line breaks are allowed where text has lines
# (an imported sheet's cells too: annotation/datasets/sheets.py).
CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_LINE_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_typed_text(value, *, what, max_chars, multiline=True):
    """The text without surrounding blanks, or AnnotationError naming `what` and the problem."""
    value = str(value or "").strip()
    control = (CONTROLS if multiline else _LINE_CONTROLS).search(value)
    if control:
        raise AnnotationError(
            f"{what} contains an invisible control character (U+{ord(control.group()):04X}) that "
            "cannot be stored. Please delete it, or retype the text where you pasted it."
        )
    if _SURROGATE.search(value):
        raise AnnotationError(f"{what} contains a broken character. Please retype it.")
    if len(value) > max_chars:
        raise AnnotationError(
            f"{what} is {len(value):,} characters long; at most {max_chars:,} fit. Please shorten it."
        )
    return value


def field_limit(model, name):
    """The database's length limit of a model's text field: one source for the check and the page."""
    return model._meta.get_field(name).max_length
