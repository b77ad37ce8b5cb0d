"""The workforce: who may take a stage's units, and the tests that earn a place (paper §2.2).

- standing.py: workers (in-house, and platform workers once their platform confirmed them), blocks,
  and whether the queue may give a worker a stage's units (`may_work`);
- qualifications.py: a stage's qualification test of gold items, and live gold items mixed into
  work that keep a worker's accuracy current and pause them below the stage's bar.

The models are annotation/models/workforce.py. Granting a stage's MTurk qualification type to a
qualified MTurk worker is a platform call, so it is mturk/services/qualifying.py's.
"""
