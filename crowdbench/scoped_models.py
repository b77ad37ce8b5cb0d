"""What models of every scope share (crowdbench/scoping.py)."""

from django.db import models

from crowdbench.scoping import every_group


class UniqueInEveryScope(models.Model):
    """A row whose unique fields are unique across every scope (a family's and a tournament's name
    across research groups): the check that a value is free reads every scope's rows, and says only
    that the value is taken, never whose it is."""

    class Meta:
        abstract = True

    def validate_unique(self, exclude=None):
        with every_group("unique fields are unique across research groups"):
            super().validate_unique(exclude)
