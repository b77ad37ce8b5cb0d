"""A check constraint a person can break on a form says what is wrong in its own words, next to
the field it reads: Django shows a broken constraint as "Constraint “name” is violated." above the
form. Every model with a check constraint takes `CheckedFields`, and every check constraint has a
`violation_error_message` (tests/project/test_constraint_messages.py holds each to it). Every
JSON field is a `StorableJSONField`, whose value is checked as storable (`storable_json`;
tests/project/test_json_fields.py).
"""

import math

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models, router


def fields_read(condition):
    """The model fields a check constraint's condition (a Q) reads, on either side of each lookup;
    None when it reads through an expression this cannot follow (its error then stays the form's)."""
    if not isinstance(condition, models.Q):
        return None
    read = set()
    for child in condition.children:
        if isinstance(child, models.Q):
            inner = fields_read(child)
            if inner is None:
                return None
            read |= inner
            continue
        if not isinstance(child, tuple):
            return None
        lookup, value = child
        read.add(lookup.split("__")[0])
        if isinstance(value, models.F):
            read.add(value.name.split("__")[0])
        elif hasattr(value, "resolve_expression"):
            return None
    return read


def _placed_at(constraint):
    if isinstance(constraint, models.CheckConstraint):
        read = fields_read(constraint.condition)
        # A form places an error at a field it has by name, never at "pk".
        return next(iter(read)) if read and len(read) == 1 and read != {"pk"} else NON_FIELD_ERRORS
    if isinstance(constraint, models.UniqueConstraint) and len(constraint.fields) == 1:
        return constraint.fields[0]
    return NON_FIELD_ERRORS


class CheckedFields:
    """Model.validate_constraints, with a constraint that reads one field reported at that field."""

    def validate_constraints(self, exclude=None):
        using = router.db_for_write(self.__class__, instance=self)
        errors = {}
        for model_class, constraints in self.get_constraints():
            for constraint in constraints:
                try:
                    constraint.validate(model_class, self, exclude=exclude, using=using)
                except ValidationError as error:
                    errors.setdefault(_placed_at(constraint), []).append(error)
        if errors:
            raise ValidationError(errors)


def storable_json(value):
    """A JSON field's value as PostgreSQL's jsonb stores it and every page can show it: no NaN or
    infinity (JSON has none; a form's parser takes them), no NUL character (jsonb refuses \\u0000)
    and no lone surrogate (no UTF-8 encodes one), in any value or key, however deep. Typed into a
    form, each was an error of the database, a 500."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValidationError("Numbers must be finite: NaN and infinity are not JSON.", code="json_number")
        if isinstance(item, str):
            if "\x00" in item:
                raise ValidationError("A text holds a NUL character (\\u0000), which cannot be stored.",
                                      code="json_nul")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ValidationError("A text holds a lone surrogate (such as \\ud800), which is no character.",
                                      code="json_surrogate") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


class StorableJSONFormField(forms.JSONField):
    """A form's JSON box that never shows what it cannot store: a value `storable_json` refuses is
    shown again as typed (Django's box wrote a lone surrogate back into the page, which no UTF-8
    encodes: the page was a 500)."""

    default_validators = [storable_json]

    def bound_data(self, data, initial):
        value = super().bound_data(data, initial)
        try:
            storable_json(value)
        except ValidationError:
            return forms.fields.InvalidJSONInput(data)
        return value


class StorableJSONField(models.JSONField):
    """The project's JSON field: its value is checked as storable wherever a form or a serializer
    validates it, and its form's box shows a refused value as typed."""

    default_validators = [storable_json]

    def formfield(self, **kwargs):
        return super().formfield(**{"form_class": StorableJSONFormField, **kwargs})
