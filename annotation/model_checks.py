"""A check constraint a person can break on a form says what is wrong in its own words, next to
the field it reads: Django shows a broken constraint as "Constraint “name” is violated." above the
form. Every model with a check constraint takes `CheckedFields`, and every check constraint has a
`violation_error_message` (tests/project/test_constraint_messages.py holds each to it)."""

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
