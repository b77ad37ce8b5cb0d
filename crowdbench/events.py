"""The one door every event goes out of, below the domain, as crowdbench/jobs.py is for jobs.

`emit` is called where the change that causes an event is made, inside its transaction. The
webhooks app listens to `event_emitted` and writes what each consumer is owed (a researcher's URL,
the researchers' e-mail) in that same transaction, to be sent once it commits; so an event is
recorded exactly when its change is, and the domain never imports the app that sends it.

An event's id is derived from its name and a key naming what happened once (run 7 finished), so
emitting the same event again, from a retried job or a second path, records nothing new.
"""

import uuid

from django.dispatch import Signal

# Every event, with what it means; docs/webhooks.md shows each one's payload.
EVENTS = {
    "stage.launched": "Stage launched",
    "stage.completed": "Stage complete",
    "references.ready": "References ready",
    "judge_run.finished": "Judge run finished",
    "judge_run.failed": "Judge run failed",
    "study.completed": "Study complete",
    "snapshot.built": "Snapshot built",
    "payment.made": "Payment made",
    "worker.paused": "Worker paused",
}

_NAMESPACE = uuid.UUID("7d5f3c1e-2b7a-4e0c-9a51-0c8f1e6b2d40")

# Sent by `emit` with `event`, `event_id`, `scope` and `payload`.
event_emitted = Signal()


def event_id(*, event, key):
    return uuid.uuid5(_NAMESPACE, f"{event}:{key}")


def emit(*, event, scope, payload, key):
    """Record `event` about `scope` (a family, tournament, study, snapshot or worker) with its
    JSON `payload`. `key` names the occurrence: the same event and key are one event, however
    often emitted."""
    if event not in EVENTS:
        raise ValueError(f"Unknown event {event!r}; add it to crowdbench.events.EVENTS.")
    event_emitted.send(sender=emit, event=event, event_id=event_id(event=event, key=key), scope=scope,
                       payload=payload)
