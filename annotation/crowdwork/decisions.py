"""What a unit's answers decide, asked again whenever they change: a submit, a review, a change of
the stage's settings."""

from annotation.collection.captions import settle_caption_round
from annotation.collection.verification import settle_reference
from annotation.crowdwork.completion import announce_if_stage_complete
from annotation.crowdwork.lock_order import lock_unit_and_item
from annotation.crowdwork.stopping import ask_what_is_needed
from annotation.models import Instance, Reference, Stage, Tournament, WorkUnit
from crowdbench.jobs import enqueue


def settle_unit(unit):
    """Close a unit that has all the answers it asks now (under ask until decided, once they
    decide), and decide what it completes. Returns (closed, decided)."""
    unit = lock_unit_and_item(unit)
    ask_what_is_needed(unit)
    closed = unit.status == WorkUnit.Status.OPEN and unit.assignments.answered().count() >= unit.overlap
    if closed:
        unit.status = WorkUnit.Status.DONE
        unit.save(update_fields=["status"])
        if unit.stage == Stage.PAIRWISE and unit.battle_id is not None:
            ask_for_next_round(unit.battle.tournament)
    decided = None
    if unit.stage == Stage.CAPTION and unit.instance_id is not None:
        instance = Instance.objects.select_for_update().select_related("family").get(pk=unit.instance_id)
        decided = settle_caption_round(instance=instance, unit=unit)
    elif unit.stage == Stage.VERIFICATION and unit.reference_id is not None:
        reference = Reference.objects.select_for_update().get(pk=unit.reference_id)
        decided = settle_reference(reference=reference, unit=unit)
    if closed:
        announce_if_stage_complete(unit=unit)
    return closed, decided is not None


def ask_for_next_round(tournament):
    """An active tournament's next round may be due once a battle is closed: its job decides (and
    makes nothing while battles are open); the outbox sweep sends it again if it is lost."""
    if tournament.sampling == Tournament.Sampling.ACTIVE:
        enqueue("tasks.next_battle_round", tournament.pk)
