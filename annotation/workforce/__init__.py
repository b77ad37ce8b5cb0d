"""The workforce: the tests that earn a place in a stage (paper §2.2) and the accuracy they keep.
Whether the queue may give a worker a stage's units (`may_work`), with the workers themselves
(in-house, and platform workers once their platform confirmed them), is the queue's side:
annotation/crowdwork/standing.py.

- qualifications.py: a stage's qualification test of gold items, and live gold items mixed into
  work that keep a worker's accuracy current and pause them below the stage's bar.

The models are annotation/models/workforce.py. Granting a stage's MTurk qualification type to a
qualified MTurk worker is a platform call, so it is mturk/services/qualifying.py's.
"""
