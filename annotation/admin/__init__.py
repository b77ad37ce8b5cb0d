"""The researchers' admin, one module per part of the pipeline, the crowd platforms' studies,
submissions and qualification tests included; importing each registers it. What every page shares
(group scoping, paging, the audit trail, an action's form step) is beside them, so the crowd
platforms (mturk/) keep no admin of their own and nothing below the admin imports it."""

from annotation.admin import (
    crowd_studies,
    families,
    images,
    instances,
    judging,
    platform_submissions,
    qualifications,
    queue,
    review,
    scoring,
    sign_in_attempts,
    snapshots,
    teams,
    tokens,
)

__all__ = ["crowd_studies", "families", "images", "instances", "judging", "platform_submissions", "qualifications",
           "queue", "review", "scoring", "sign_in_attempts", "snapshots", "teams", "tokens"]
