"""The researchers' admin, one module per part of the pipeline; importing each registers it."""

from annotation.admin import pipeline, scoring, snapshots

__all__ = ["pipeline", "scoring", "snapshots"]
