"""How an annotator's answer is read from the page's form: the fields every stage's form shares,
and the one message a refused form is shown with.

Each stage has one form (frontend/collection_pages.py, frontend/pairwise_page.py), read alike for a
unit and for a live gold item shown as one of the stage's tasks; the qualification test has its own
(frontend/qualification_views.py). A form checks what can be told from the answer alone (a choice
among the page's options, typed text within its cap and free of control characters); the domain's
services check the rest and stay the guard of what is stored.
"""

from django import forms
from django.core.exceptions import ValidationError

from annotation.exceptions import AnnotationError
from annotation.typed_text import clean_typed_text
from frontend.arrival import MAX_ACTIVE_SECONDS


class PostedText(forms.Field):
    """A text field as posted, unchecked here: a domain check that names the field reads it (the
    image details of a slot, say), and a refused form shows it again as the worker typed it."""

    def __init__(self, **kwargs):
        super().__init__(required=False, **kwargs)

    def to_python(self, value):
        return value if isinstance(value, str) else ""


class TypedTextField(forms.Field):
    """Text a worker typed, checked as every typed text is (annotation.typed_text): the message
    names the field as the page does and says what to fix."""

    def __init__(self, *, what, max_chars, multiline=True, required=False, **kwargs):
        super().__init__(required=required, **kwargs)
        self.what, self.max_chars, self.multiline = what, max_chars, multiline

    def to_python(self, value):
        try:
            return clean_typed_text(value, what=self.what, max_chars=self.max_chars, multiline=self.multiline)
        except AnnotationError as error:
            raise ValidationError(str(error)) from None


class ActiveSecondsField(forms.Field):
    """The page's count of seconds its worker was active: a figure for pay planning, so a value
    that is no number is left out rather than refusing the answer."""

    def __init__(self, **kwargs):
        super().__init__(required=False, **kwargs)

    def to_python(self, value):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            return None
        return min(max(seconds, 0.0), MAX_ACTIVE_SECONDS) if seconds == seconds else None


class PageForm(forms.Form):
    """A form of an annotator page, which a refused answer shows again as it was posted."""

    def shown(self, name):
        """What the page's field `name` shows: as posted, or empty on a new page."""
        value = self.data.get(self.add_prefix(name), "") if self.is_bound else ""
        return value if isinstance(value, str) else ""


class AnswerForm(PageForm):
    """A stage's answer: the stage's own fields, and what every stage's form reads besides.

    `shown` is what the page showed, where the form needs it to know what was asked (a gold item's
    criteria, say); it is None for a unit's answer, whose service knows it."""

    active_seconds = ActiveSecondsField()

    def __init__(self, data=None, files=None, *, shown=None, **kwargs):
        super().__init__(data, files, **kwargs)
        self.shown_material = shown


def refusal_message(*forms_read):
    """The messages of every refused field of `forms_read`, in the page's order, as one text."""
    messages = []
    for form in forms_read:
        for errors in form.errors.values():
            messages.extend(message for message in errors if message not in messages)
    return " ".join(messages)


def answer_of(form):
    """The cleaned answer of a form, or AnnotationError with the message a refused form shows."""
    if not form.is_valid():
        raise AnnotationError(refusal_message(form))
    return form.cleaned_data
