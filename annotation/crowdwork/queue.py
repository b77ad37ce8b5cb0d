"""The one work queue every crowd stage draws from.

A worker asks for the next unit of a stage and gets a lease on one that still has room under its
overlap, about an item (an instance to caption, a reference, a battle) they have never held or
answered before, and (for verification) whose instruction or caption they did not write. Leases
expire and give their slot back. On PostgreSQL, concurrent requests skip rows another request has
locked (`FOR UPDATE SKIP LOCKED`) instead of queueing behind them.

A lease's terms, and its return to the pool, are annotation/crowdwork/leases.py's; which platform
assignment a lease is worked under, and refusing claims that disagree with it, platform_claims.py's;
what an annotator is shown next, next_step.py's; storing an answer, answers.py's.
"""

from functools import partial

from django.db import connections, models, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from annotation.crowdwork.leases import lease_expiry, lease_minutes_for, stage_lease_minutes
from annotation.crowdwork.lock_order import DECIDED_MESSAGE, lock_lease
from annotation.crowdwork.platform_claims import bind_claim, check_claim
from annotation.crowdwork.standing import may_work
from annotation.exceptions import AnnotationError
from annotation.models import Assignment, Instance, Stage, Worker, WorkUnit
from annotation.models.instances import page_images


def slots_taken(now):
    taken = (
        Assignment.objects.holding_a_slot(now)
        .filter(unit=OuterRef("pk"))
        .order_by()
        .values("unit")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(taken), 0)


# What one answer of a stage is about: a worker answers it once, whatever units name it (an
# instruction-generation task is its own item: a worker may write many of a family's instances).
ITEM_OF_STAGE = {
    Stage.INSTRUCTION_GENERATION: "pk",
    Stage.CAPTION: "instance",
    Stage.VERIFICATION: "reference",
    Stage.PAIRWISE: "battle",
}


def _items_held_or_answered(worker, stage):
    """The worker's assignments (any state) on a unit about the same item as the outer unit."""
    item = ITEM_OF_STAGE[stage]
    return Assignment.objects.filter(worker=worker, unit__stage=stage,
                                     **{f"unit__{item}": OuterRef(item)})


def of_families(rows, family, path="family"):
    """`rows` of `family`: one family, a query of families (a study naming none draws on every
    family of no group), or None for every family."""
    if family is None:
        return rows
    if isinstance(family, models.QuerySet):
        return rows.filter(**{f"{path}__in": family.values("pk")})
    return rows.filter(**{path: family})


def units_open_to(*, worker, stage, family=None, now=None):
    """Open units of a launched stage that this worker may take, with room under their overlap."""
    now = now or timezone.now()
    units = WorkUnit.objects.filter(
        stage=stage,
        status=WorkUnit.Status.OPEN,
        family__stage_configs__stage=stage,
        family__stage_configs__launched_at__isnull=False,
    ).exclude(Exists(_items_held_or_answered(worker, stage)))
    units = of_families(units, family)
    if stage == Stage.VERIFICATION:
        # A worker never verifies an instance whose instruction or caption they wrote.
        units = units.exclude(instance__author=worker).exclude(reference__caption__author=worker)
    if stage == Stage.PAIRWISE:
        # A battle is judged while its instance is verified: a decision reopened in review holds
        # its battles back until it is made again.
        units = units.filter(battle__instance__status=Instance.Status.VERIFIED)
    if not may_work(worker, stage):
        # Blocked, not qualified for the stage, or paused for low accuracy on gold items.
        return WorkUnit.objects.none()
    return units.alias(slots_taken=slots_taken(now)).filter(slots_taken__lt=F("overlap"))


# What a stage's page shows besides the unit itself, fetched with it so rendering asks nothing more.
# Only its own stage's: every join more is planned by PostgreSQL on every request (nine joins took
# 3 ms to plan on the busiest request, three take under 1 ms) and built by the ORM.
_PAGE_RELATIONS = {
    Stage.INSTRUCTION_GENERATION: ("family", "instance"),
    Stage.CAPTION: ("family", "instance"),
    Stage.VERIFICATION: ("family", "instance", "reference__caption"),
    Stage.PAIRWISE: ("family", "instance", "battle__tournament", "battle__response_a", "battle__response_b"),
}


def _held_leases(*, worker, stage, family, now):
    # A lease on a unit that closed meanwhile (decided by others' answers) is not resumed: its
    # worker gets their next unit, and a submit from its page is refused kindly.
    leases = Assignment.objects.filter(
        worker=worker, unit__stage=stage, unit__status=WorkUnit.Status.OPEN, status=Assignment.Status.LEASED,
        lease_expires_at__gt=now,
    )
    return of_families(leases, family, "unit__family")


def _innermost_atomic_block():
    connection = connections[Assignment.objects.db]
    return connection.atomic_blocks[-1] if connection.in_atomic_block else None


def locked_for_leasing(workers):
    """The first worker of `workers` (None if there is none), locked against their own other
    requests (two tabs, a double click) until the current transaction ends.

    A "next unit" request that fetches its worker so takes the lock `next_assignment` needs in
    the same round trip; `next_assignment` called while that lock is held does not lock again.
    """
    block = _innermost_atomic_block()
    if block is None:
        raise TransactionManagementError("locked_for_leasing needs a transaction to hold its lock.")
    worker = workers.select_for_update(of=("self",)).first()
    if worker is not None:
        worker.locked_in = block
    return worker


def _lock(worker):
    # A lock taken in a block that has ended is gone (PostgreSQL lets go of a row lock when the
    # savepoint that took it rolls back), so it counts only while its block is still open.
    locked_in = getattr(worker, "locked_in", None)
    if not any(block is locked_in for block in connections[Assignment.objects.db].atomic_blocks):
        Worker.objects.select_for_update().filter(pk=worker.pk).values_list("pk").first()


def holds_a_lease(*, worker, stage, family=None):
    return _held_leases(worker=worker, stage=stage, family=family, now=timezone.now()).exists()


def next_assignment(*, worker, stage, family=None, platform_assignment_id="", platform_listing_id="",
                    given_back_too=True):
    """Lease the next unit of `stage` to `worker`, or return None when there is nothing for them.

    A worker holding an unexpired lease in the stage gets that lease back, so a reload resumes; one
    whose lease lapsed while they were away gets it back while nobody else took its slot; a unit
    they gave back comes back to them only once the stage has nothing else for them (and not on
    the request that follows giving one back: `given_back_too=False`).
    Platform ids (a crowd study's id and the participant's platform session) are stored with the lease.
    Inside the caller's transaction it takes no savepoint (two round trips on the busiest request):
    an error raised here fails the caller's transaction too.
    """
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        _lock(worker)
        # Asked only now that the lock is held, in a statement of its own: a request of the same
        # worker that held the lock before has committed its lease, and only a new statement's
        # snapshot sees it. The candidate query asks it too, so the usual request asks nothing more.
        held_lease = _held_leases(worker=worker, stage=stage, family=family, now=now).values("pk")[:1]
        lapsed = _earlier_leases(worker=worker, stage=stage, family=family, now=now, lapsed=True)
        given_back = _earlier_leases(worker=worker, stage=stage, family=family, now=now, lapsed=False)
        candidates = (
            units_open_to(worker=worker, stage=stage, family=family, now=now)
            # The stage's config is joined by units_open_to's filter: this reads it, no subquery.
            .annotate(lease_minutes=F("family__stage_configs__lease_minutes"),
                      held_lease_id=Subquery(held_lease), lapsed_lease_id=Subquery(lapsed.values("pk")[:1]),
                      page_images=page_images("instance"))
            .select_related(*_PAGE_RELATIONS[stage])
            .order_by("id")
        )
        resume = partial(_resumed, worker=worker, stage=stage, family=family, now=now,
                         platform_assignment_id=platform_assignment_id, platform_listing_id=platform_listing_id)

        def revive(leases):
            for lease_id in leases.values_list("pk", flat=True)[:5]:
                if _renew(lease_id, worker=worker, now=now):
                    return resume(held_lease_id=lease_id)
            return None

        passed_over = []
        while True:
            remaining = candidates.exclude(pk__in=passed_over) if passed_over else candidates
            unit = remaining.select_for_update(skip_locked=True, of=("self",)).first()
            if unit is None:
                # Nothing unlocked, which says nothing of a held lease: ask before waiting.
                if held := resume() or revive(lapsed):
                    return held
                # Every candidate is locked by another request, but with an overlap above one a
                # locked unit may still have room once that request commits: wait for it.
                unit = remaining.select_for_update(of=("self",)).first()
            if unit is None:
                break
            # A lease seen here may have been submitted or given back since (from another tab,
            # which does not take this lock): then the unit in hand is leased instead.
            if unit.held_lease_id is not None and (held := resume(held_lease_id=unit.held_lease_id)):
                return held
            if unit.lapsed_lease_id is not None and (held := revive(lapsed)):
                return held
            lease = _lease_if_room(Assignment(
                unit=unit,
                worker=worker,
                leased_at=now,
                lease_expires_at=lease_expiry(now=now, lease_minutes=unit.lease_minutes),
                platform_assignment_id=platform_assignment_id,
                platform_listing_id=platform_listing_id,
            ), now)
            if lease is None:
                passed_over.append(unit.pk)
                continue
            _keep_page_images(unit, unit.page_images)
            lease.lease_minutes = unit.lease_minutes
            return lease
        # Nothing else is left for them: a unit they gave back, unless they gave it back just now.
        if not given_back_too or not may_work(worker, stage):
            return None
        return revive(given_back)


def _earlier_leases(*, worker, stage, family, now, lapsed):
    """The worker's earlier leases on open units of a launched stage: those that lapsed while they
    were away (`lapsed`), or those they gave back, newest first."""
    leases = Assignment.objects.filter(
        worker=worker, unit__stage=stage, unit__status=WorkUnit.Status.OPEN,
        unit__family__stage_configs__stage=stage, unit__family__stage_configs__launched_at__isnull=False,
    )
    if lapsed:
        leases = leases.filter(Q(status=Assignment.Status.EXPIRED)
                               | Q(status=Assignment.Status.LEASED, lease_expires_at__lte=now))
    else:
        leases = leases.filter(status=Assignment.Status.RETURNED)
    return of_families(leases, family, "unit__family").order_by("-leased_at", "-pk")


def _renew(lease_id, *, worker, now):
    """Lease again, as the same assignment, a unit the worker held before, while its slot is free
    and they hold or answered nothing else about its item. True when it was renewed."""
    lease = lock_lease(lease_id, worker=worker)
    if lease is None or lease.status == Assignment.Status.SUBMITTED:
        return False
    unit = lease.unit
    taken = unit.assignments.holding_a_slot(now).exclude(pk=lease.pk).count()
    item = ITEM_OF_STAGE[unit.stage]
    elsewhere = Assignment.objects.filter(
        Q(status=Assignment.Status.SUBMITTED) | Q(status=Assignment.Status.LEASED, lease_expires_at__gt=now),
        worker=worker, unit__stage=unit.stage,
        **{f"unit__{item}": unit.pk if item == "pk" else getattr(unit, f"{item}_id")},
    ).exclude(pk=lease.pk)
    if unit.status != WorkUnit.Status.OPEN or taken >= unit.overlap or elsewhere.exists():
        return False
    lease.status, lease.leased_at = Assignment.Status.LEASED, now
    lease.lease_expires_at = lease_expiry(now=now, lease_minutes=lease_minutes_for(unit))
    lease.save(update_fields=["status", "leased_at", "lease_expires_at"])
    return True


def keep_lease_alive(*, assignment):
    """A sign of life from the task's page: the lease runs on another LEASE_IDLE_MINUTES, up to the
    stage's lease. A lease that lapsed meanwhile is taken again while its slot is still free.
    Returns the new expiry, or raises AnnotationError saying why the task is no longer theirs."""
    now = timezone.now()
    with transaction.atomic():
        lease = lock_lease(assignment.pk)
        if lease is None:
            raise AnnotationError("This task is not known; please ask for a new one.")
        if lease.status == Assignment.Status.SUBMITTED:
            raise AnnotationError("This task is saved already.")
        if lease.status == Assignment.Status.RETURNED:
            raise AnnotationError("You gave this task back.")
        if lease.unit.status == WorkUnit.Status.DONE:
            raise AnnotationError(DECIDED_MESSAGE)
        if lease.status == Assignment.Status.LEASED and lease.lease_expires_at > now:
            lease.lease_expires_at = lease_expiry(now=now, lease_minutes=lease_minutes_for(lease.unit),
                                                  leased_at=lease.leased_at)
            lease.save(update_fields=["lease_expires_at"])
            return lease.lease_expires_at
        if not _renew(lease.pk, worker=lease.worker, now=now):
            raise AnnotationError("This task went to someone else while you were away. Your text is kept in this "
                                  "browser; please ask for a new task.")
        return Assignment.objects.values_list("lease_expires_at", flat=True).get(pk=lease.pk)


def _resumed(*, worker, stage, family, now, platform_assignment_id, platform_listing_id, held_lease_id=None):
    """The lease the worker holds, when they hold one (a reload, a second tab), or None."""
    leases = _held_leases(worker=worker, stage=stage, family=family, now=now)
    if held_lease_id is not None:
        leases = leases.filter(pk=held_lease_id)
    held = (
        leases.select_related(*(f"unit__{relation}" for relation in _PAGE_RELATIONS[stage]))
        .annotate(page_images=page_images("unit__instance"), lease_minutes=stage_lease_minutes()).first()
    )
    if held is None:
        return None
    _keep_page_images(held.unit, held.page_images)
    held.worker = worker  # the caller's instance, and what it was fetched with
    bind_claim(held, platform_assignment_id=platform_assignment_id, platform_listing_id=platform_listing_id)
    return held


def _keep_page_images(unit, rows):
    if unit.instance is not None:
        unit.instance.keep_page_images(rows)


def _lease_if_room(lease, now):
    """Insert the lease if its unit still has room under its overlap, or return None.

    The slots are counted again in a new statement now that we hold the unit's lock: a transaction
    that held it before us has committed by now, and its lease is visible only to a new snapshot.
    Counting and inserting are one statement (INSERT ... SELECT ... WHERE), one round trip on the
    busiest request there is.
    """
    taken, taken_params = (
        Assignment.objects.holding_a_slot(now).filter(unit_id=lease.unit_id).order_by()
        .values("unit_id").annotate(n=Count("pk")).values("n").query.sql_with_params()
    )
    fields = [field for field in Assignment._meta.concrete_fields if not field.primary_key]
    connection = connections[Assignment.objects.db]
    quote = connection.ops.quote_name
    # pre_save as Django's own insert does, so a field filled on save (auto_now_add) is filled here too.
    values = [field.get_db_prep_save(field.pre_save(lease, True), connection) for field in fields]
    sql = (
        f"INSERT INTO {quote(Assignment._meta.db_table)} "
        f"({', '.join(quote(field.column) for field in fields)}) "
        f"SELECT {', '.join(['%s'] * len(fields))} "
        f"WHERE COALESCE(({taken}), 0) < %s RETURNING {quote(Assignment._meta.pk.column)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, *taken_params, lease.unit.overlap])
        inserted = cursor.fetchone()
    if inserted is None:
        return None
    lease.pk = inserted[0]
    lease._state.adding = False
    lease._state.db = connection.alias
    return lease


def lease_unit(*, worker, unit, platform_assignment_id="", platform_listing_id="", rebind=False):
    """Lease one given unit (an MTurk HIT points at its unit), under the same rules as the queue.

    Returns the worker's assignment on it (an existing one is returned, so a reload resumes), or
    raises AnnotationError saying why they cannot have it.

    With platform ids (MTurk's assignmentId and hitId) the first lease binds them to the
    assignment, and they never change afterwards unless the caller has had the platform confirm a
    different pair (`rebind`): a worker id in a URL is a claim anybody can make, so the same worker
    id with another assignment id, or an assignment id already bound to another worker, raises
    ClaimConflict before anything is leased or written.
    """
    now = timezone.now()
    with transaction.atomic():
        Worker.objects.select_for_update().filter(pk=worker.pk).first()
        mine = (Assignment.objects.filter(unit=unit, worker=worker)
                .annotate(lease_minutes=stage_lease_minutes()).first())
        if platform_assignment_id:
            check_claim(worker=worker, unit=unit, platform_assignment_id=platform_assignment_id,
                        platform_listing_id=platform_listing_id, rebind=rebind)
        if mine is not None:
            if mine.status == Assignment.Status.SUBMITTED:
                raise AnnotationError("You have already done this task.")
            if mine.status == Assignment.Status.LEASED and mine.lease_expires_at > now:
                bind_claim(mine, platform_assignment_id=platform_assignment_id, platform_listing_id=platform_listing_id)
                return mine
        open_to_worker = units_open_to(worker=worker, stage=unit.stage, now=now).filter(pk=unit.pk)
        if mine is None and not open_to_worker.exists():
            raise AnnotationError(
                "This task is not available to you: it is complete, it is about your own work, "
                "or its stage is paused."
            )
        locked = WorkUnit.objects.select_for_update().get(pk=unit.pk)
        taken = locked.assignments.holding_a_slot(now)
        if mine is not None:
            taken = taken.exclude(pk=mine.pk)
        if locked.status != WorkUnit.Status.OPEN or taken.count() >= locked.overlap:
            raise AnnotationError("This task already has all the answers it needs.")
        lease_minutes = lease_minutes_for(locked)
        expires = lease_expiry(now=now, lease_minutes=lease_minutes)
        if mine is not None:
            # An expired or returned lease of this worker's own is renewed rather than duplicated.
            mine.status, mine.leased_at, mine.lease_expires_at = Assignment.Status.LEASED, now, expires
            mine.save(update_fields=["status", "leased_at", "lease_expires_at"])
            bind_claim(mine, platform_assignment_id=platform_assignment_id, platform_listing_id=platform_listing_id)
            return mine
        lease = Assignment.objects.create(unit=locked, worker=worker, leased_at=now,
                                          lease_expires_at=expires,
                                          platform_assignment_id=platform_assignment_id,
                                          platform_listing_id=platform_listing_id)
        lease.lease_minutes = lease_minutes
        return lease


