"""Crowd work, the part every crowd stage shares, as the work flows: a launched stage's units are
made (stages); a worker the queue may give them to (standing) is leased one (queue, its terms and
its end in leases, the platform's claims on it in platform_claims) or shown what comes next
(next_step); their answer comes in
through the one submit (answers), under the one lock order (lock_order), and its unit closes once
its answers reach what it asks (stopping); a stage that has nothing left to ask is announced
(completion). Where every stage's answers meet: what they decide asked again (decisions), a
stage's changed settings reaching its open units (configs), and review. Work bought beyond what a
stage asked is found and reported in surplus. What each stage stores and decides is its own
package's: collection/ and preferences/."""
