"""The researchers' admin, one module per part of the pipeline; importing each registers it."""

from annotation.admin import families, images, instances, judging, queue, review, scoring, snapshots, teams, tokens

__all__ = ["families", "images", "instances", "judging", "queue", "review", "scoring", "snapshots", "teams", "tokens"]
