"""The crowd platforms. The name is the design card's; the package holds more than MTurk.

It uses the domain (annotation/: workers, work units, leases, qualifications); the domain never
uses it. Where each thing lives:

- One interface, four platforms (mturk/platforms/): `base.Backend`, and a backend each for Amazon
  Mechanical Turk (`mturk.py`, through `mturk/client.py`, boto3), CloudResearch Connect
  (`cloudresearch.py`) and Prolific (`prolific.py`), both through `http.py`, and in-house
  annotators (`local.py`: the queue is the platform). Every request made of a platform is recorded
  (`calls.py`); `model_check.py` checks MTurk requests against botocore's service model.
- Arrival and identity: study links and the way back with the completion code (`links.py`); a
  worker id in a URL is a claim, checked with the platform (`identity.py`); study participants,
  their progress and their completion code (`participants.py`). `models.py`: studies, HITs,
  completions, the audit log.
- Publishing, sync, review and pay (mturk/services/): `publishing.py` (work out within the budget,
  reward from `pay.py`'s plan to a target wage with the platform's fees), `syncing.py` (submitted
  work back, on a schedule and from MTurk's notifications), `confirming.py` (work counts once the
  platform's record names its worker), `reviewing.py` (approve, reject, bonus, block, message),
  `qualifying.py` (a passed test granted as MTurk's qualification type), `audit.py` (who may pay,
  and every payment action logged), `access.py` (what a study's page says about its platform).
- The researchers' side is in the admin (annotation/admin/crowd_studies.py, platform_submissions.py,
  qualifications.py), with every other admin page; `plan_pay` is in mturk/management/.
"""
