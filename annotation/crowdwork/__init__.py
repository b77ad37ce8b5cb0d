"""Crowd work, the part every crowd stage shares, as the work flows: a launched stage's units are
made (stages), a worker is leased one (queue, with the platform's claims on a lease in
platform_claims) or shown what comes next (next_step); their answer is stored once, under one lock
order (lock_order), and its unit closes once its answers reach what it asks (stopping, decisions);
a stage that has nothing left to ask is announced (completion); a stage's changed settings reach
its open units (configs); answers are reviewed (review). Work bought beyond what a stage asked is
found and reported in surplus. What each stage stores is its own package's: collection/ and
preferences/."""
