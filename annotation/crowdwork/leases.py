"""A lease's terms and its end: how long a worker holds a unit, what its page is told of that, and
how a lease goes back to the pool (given back, stopped, expired). Taking a lease, and taking one
again, is the queue's (annotation/crowdwork/queue.py)."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import Assignment, StageConfig

DEFAULT_LEASE_MINUTES = 30


def lease_minutes_for(unit):
    config = StageConfig.objects.filter(family_id=unit.family_id, stage=unit.stage).first()
    return config.lease_minutes if config else DEFAULT_LEASE_MINUTES


def stage_lease_minutes():
    """An assignment's stage lease minutes, as a subquery of the statement that fetches it."""
    config = StageConfig.objects.filter(family_id=OuterRef("unit__family_id"), stage=OuterRef("unit__stage"))
    return Coalesce(Subquery(config.values("lease_minutes")[:1]), DEFAULT_LEASE_MINUTES)


def lease_expiry(*, now, lease_minutes, leased_at=None):
    """When a lease lapses: LEASE_IDLE_MINUTES after the last sign of life from its page (the page
    sends one while the worker is active, `keep_lease_alive`), and at the latest the stage's lease
    after it was taken. So a worker who stops, or closes the tab, holds nothing for long."""
    leased_at = leased_at or now
    return min(now + timedelta(minutes=settings.LEASE_IDLE_MINUTES),
               leased_at + timedelta(minutes=lease_minutes))


@dataclass(frozen=True)
class LeaseTerms:
    """What a task's page is told of its lease, so that it warns from the server's word rather than
    a guess of its own."""
    expires_at: datetime
    renewable: bool
    """Signs of life can still move `expires_at` later; false once it is the stage's lease limit."""


def lease_terms(lease):
    """The terms of `lease` as stored (its `unit` loaded). The stage's lease minutes are read from
    `lease.lease_minutes` when the query that fetched the lease read them too (the task page's
    requests count their round trips), and asked for otherwise."""
    minutes = getattr(lease, "lease_minutes", None)
    limit = lease.leased_at + timedelta(minutes=minutes if minutes is not None else lease_minutes_for(lease.unit))
    return LeaseTerms(expires_at=lease.lease_expires_at, renewable=lease.lease_expires_at < limit)


def return_assignment(*, assignment):
    """The worker gives the unit back before submitting; its slot is free at once."""
    with transaction.atomic():
        updated = Assignment.objects.filter(
            pk=assignment.pk, status=Assignment.Status.LEASED
        ).update(status=Assignment.Status.RETURNED)
    return bool(updated)


def return_held(*, worker, stage=None, platform_listing_id=None):
    """Every lease the worker holds, in this stage or under this platform listing (a study they stop,
    a stage they are paused in), goes back to the pool at once; how many did."""
    held = Assignment.objects.filter(worker=worker, status=Assignment.Status.LEASED)
    if stage is not None:
        held = held.filter(unit__stage=stage)
    if platform_listing_id is not None:
        held = held.filter(platform_listing_id=platform_listing_id)
    return held.update(status=Assignment.Status.RETURNED)


def expire_leases(*, now=None):
    """Mark expired leases, so progress counts say 'waiting' rather than 'leased'."""
    now = now or timezone.now()
    return Assignment.objects.filter(
        status=Assignment.Status.LEASED, lease_expires_at__lte=now
    ).update(status=Assignment.Status.EXPIRED)
