"""What every admin action over selected rows does with a row the domain refuses."""

from django.contrib import messages

from annotation.exceptions import AnnotationError


def each_selected(modeladmin, request, rows, step, *, label=str):
    """`step(row)` for every selected row. A row the domain refuses (AnnotationError, of which
    PlatformError is one) is reported under `label(row)` and the others go on: one bad row
    does not stop a batch. Returns [(row, what step returned)] for the rows that went through."""
    done = []
    for row in rows:
        try:
            result = step(row)
        except AnnotationError as error:
            modeladmin.message_user(request, f"{label(row)}: {error}", messages.ERROR)
            continue
        done.append((row, result))
    return done
