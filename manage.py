#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
    from django.core.management import execute_from_command_line

    from crowdbench import scoping

    # A command is the operator's, for every group; the requests runserver answers are each in
    # their user's scope (annotation/group_scope.py).
    scoping.enter(scoping.EveryGroup("a management command is run by the operator"))
    execute_from_command_line(sys.argv)
