"""The researchers' side of the crowd platforms: studies, HITs, the review queue, bonuses, blocks,
qualification tests and the audit log. Payment actions need `mturk.pay_workers`; worker ids show
as pseudonyms. Importing each module registers it."""

from mturk.admin import qualifications, review, studies

__all__ = ["qualifications", "review", "studies"]
