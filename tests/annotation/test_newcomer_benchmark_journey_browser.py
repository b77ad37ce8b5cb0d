"""Issue 36's newcomer, clicked through in headless Chromium: the benchmark a researcher exports
holds only what counted work decided, and nothing waits forever.

A researcher's own family of eight photos: captions and references come in through the real
services (one captioner is a spammer), and the researcher sets verification to decide by
Dawid-Skene, asking until two verifiers agree (of up to three), on the family's page. In-house
annotators verify: the spammer answers "correct" to everything, ana clicks through the real
verification page, the others answer through the submit service. The worker-model job runs as
the worker would run it; the researcher bulk-rejects the spammer's answers (captions and votes) on
"Answers to review", the job runs again, the researcher raises the family's target on its page, and
two snapshots are built, the second from the admin's snapshot page. Then the snapshots' files are
read: no rejected caption, no discarded instance, no reference decided against every counted vote,
and every reference of the family is decided or visibly waiting on the workflow page; and
`manage.py check_benchmark` finds nothing.

Screenshots land in test-artifacts/screenshots/newcomer-*.png.
"""

import io
import os
import re

import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotation.collection import captions, references, verification, worker_model_job
from annotation.collection.waiting import Waits, waits_for
from annotation.crowdwork import queue, stages
from annotation.crowdwork.standing import local_worker
from annotation.datasets import snapshots
from annotation.models import (
    Aggregation,
    Assignment,
    Caption,
    Instance,
    Reference,
    Snapshot,
    Stage,
    StageConfig,
    WorkState,
    WorkUnit,
)
from tests.annotation.admin.conftest import PASSWORD, signed_in_page
from tests.factories import FamilyFactory, InstanceFactory, launch
from tests.frontend_support import photo
from tests.paths import SCREENSHOTS

# Playwright's sync API runs an event loop in this thread; the ORM calls made here are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANNOTATOR_PASSWORD = "annotate-me-42"
# One instruction per photo, and the reference pasted for it; the two marked False are wrong, as a
# careful verifier sees.
ITEMS = {
    "astronaut": ("What is this person's job? Give the clues.",
                  "She is an astronaut: the flight suit and the mission patches say so.", True),
    "camera": ("What is the man holding, and what is it for?",
               "A camera on a tripod, for taking photographs.", True),
    "chelsea": ("What is the cat most likely watching?",
                "Something outside the frame: its eyes and ears point the same way.", True),
    "clock": ("What time does the clock show?", "About ten past ten, a clock-maker's favourite.", True),
    "coffee": ("Is this drink hot or cold? Explain what shows it.",
               "Hot: it is a latte in a cup on a saucer.", True),
    "coins": ("How many coins are gold-coloured?", "None: every coin is a silver banknote.", False),
    "hubble": ("What kind of object is shown?", "A submarine photographed under water.", False),
    "rocket": ("What is about to happen?", "A rocket is about to be launched from its pad.", True),
}
TRUTH = {reference: correct for _, reference, correct in ITEMS.values()}
SPAM_CAPTION = "Nice picture, very good, I like it a lot (spam)."
REJECTION_REASON = "Answers \"correct\" to everything, and copies one caption everywhere."


def caption_of(name):
    return f"A clear photo ({name}) showing exactly what its instruction asks about, in detail."


def shoot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"newcomer-{name}.png"), full_page=True)


@pytest.fixture
def researcher_page(browser, live_server, fresh_cache):
    get_user_model().objects.create_superuser("researcher", "researcher@example.org", PASSWORD)
    page = signed_in_page(browser, live_server, "researcher", PASSWORD)
    yield page
    page.context.close()


@pytest.fixture
def annotator_page(browser, live_server):
    """Ana, an in-house annotator, logged in to the annotator pages."""
    get_user_model().objects.create_user("ana", password=ANNOTATOR_PASSWORD)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(f"{live_server.url}/work/login/")
    page.fill("#id_username", "ana")
    page.fill("#id_password", ANNOTATOR_PASSWORD)
    page.click("button[type=submit]")
    page.locator("text=Work waiting for you").wait_for()
    yield page
    context.close()


def in_house(name):
    return local_worker(get_user_model().objects.create_user(name, password=ANNOTATOR_PASSWORD))


def own_family():
    family = FamilyFactory(name="Everyday photos, asked about", target_instances=len(ITEMS))
    for name, (instruction, _, _) in ITEMS.items():
        instance = InstanceFactory(family=family, image_count=0, instruction=instruction)
        instance.instanceimage_set.create(image=photo(name), position=0)
    for stage in (Stage.INSTRUCTION_GENERATION, Stage.CAPTION, Stage.VERIFICATION):
        launch(family, stage)
        stages.create_work_units(family=family, stage=stage)
    return family


def name_of(instance):
    return next(name for name, (instruction, _, _) in ITEMS.items() if instruction == instance.instruction)


def caption_all(worker, *, text=None, limit=None):
    """`worker` captions what the caption queue hands them (at most `limit`); returns the instances."""
    done = []
    while (limit is None or len(done) < limit) and (
            lease := queue.next_assignment(worker=worker, stage=Stage.CAPTION)) is not None:
        instance = lease.unit.instance
        captions.submit_caption(assignment_id=lease.pk, worker=worker, texts=[text or caption_of(name_of(instance))])
        done.append(instance)
    return done


def paste_references(family):
    """The researcher pastes the reference of each captioned instance (no reference model here)."""
    for instance in family.instances.filter(status=Instance.Status.AWAITING_REFERENCE).order_by("pk"):
        references.store_reference(instance=instance, caption=instance.current_caption,
                                   text=ITEMS[name_of(instance)][1], source=Reference.Source.MANUAL)


def verify_all(worker, *, always_correct=False, limit=None):
    """`worker` answers the verification tasks the queue hands them (at most `limit`): the truth, or
    "correct" to everything."""
    answered = 0
    while (limit is None or answered < limit) and (
            lease := queue.next_assignment(worker=worker, stage=Stage.VERIFICATION)) is not None:
        is_correct = always_correct or TRUTH[lease.unit.reference.text]
        verification.submit_verification(assignment_id=lease.pk, worker=worker, is_correct=is_correct,
                                         problem_in_response=not is_correct)
        answered += 1
    return answered


def verify_in_the_browser(page, live_server, family):
    """Ana checks every response the verification page shows her, as a careful verifier, until
    nothing waits; returns how many she answered."""
    page.goto(f"{live_server.url}/work/verification/?family={family.pk}")
    answered = 0
    while True:
        response, nothing = page.locator(".response-text"), page.locator("h1:has-text('Nothing waiting')")
        response.or_(nothing).first.wait_for()
        if nothing.count():
            return answered
        if TRUTH[response.inner_text().strip()]:
            page.check("input[value=correct]")
        else:
            page.check("input[value=incorrect]")
            page.check("input[value=response]")
        if answered == 0:
            shoot(page, "verification-page")
        with page.expect_navigation():
            page.click("[data-submit]")
        answered += 1


def verification_step(page, live_server, family):
    page.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/workflow/")
    return page.locator('[data-step="verification"]').inner_text()


def set_verification_on_the_family_page(page, live_server, family):
    page.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/change/")
    row = page.evaluate("""() => [...document.querySelectorAll('select[name^="stage_configs-"][name$="-stage"]')]
        .find(select => select.value === 'verification').name.split('-')[1]""")
    field = f"stage_configs-{row}"
    page.locator(f'select[name="{field}-aggregation"]').select_option(Aggregation.DAWID_SKENE.value)
    page.locator(f'input[name="{field}-adaptive"]').check()
    page.locator(f'input[name="{field}-agree_to_decide"]').fill("2")
    page.locator(f'input[name="{field}-overlap"]').fill("3")
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(f"{live_server.url}/admin/annotation/instructionfamily/")


def reject_in_the_admin(page, live_server, worker):
    page.goto(f"{live_server.url}/admin/annotation/answer/?worker__id__exact={worker.pk}")
    page.locator("#action-toggle").check()
    page.locator('select[name="action"]').select_option("reject")
    page.locator('button[name="index"]').click()
    page.locator("#id_reason").fill(REJECTION_REASON)
    shoot(page, "reject-form")
    page.locator('input[name="apply"]').click()
    page.wait_for_url(re.compile(r"/admin/annotation/answer/"))
    return page.locator(".messagelist").inner_text()


def snapshot_texts(snapshot):
    """{file name: its text} of every file a built snapshot lists; a Parquet file read as a table."""
    texts = {}
    for name in snapshots.downloadable_names(snapshot):
        with snapshots.open_snapshot_file(snapshot=snapshot, name=name) as stored:
            content = stored.read()
        texts[name] = (pd.read_parquet(io.BytesIO(content)).to_csv(index=False) if name.endswith(".parquet")
                       else content.decode("utf-8"))
    return texts


def data_files(snapshot):
    return [entry["name"] for entry in snapshot.files if "path" in entry and entry.get("table")]


def decided_against_every_counted_vote(reference):
    config = StageConfig.objects.get(family=reference.instance.family, stage=Stage.VERIFICATION)
    votes = verification.counted_votes(reference, config)
    is_correct = reference.verdict == Reference.Verdict.CORRECT
    return bool(votes) and all(vote.is_correct != is_correct for vote in votes)


def test_a_newcomers_benchmark_holds_only_what_counted_work_decided(researcher_page, annotator_page, live_server,
                                                                    snapshot_folder):
    page, ana_page = researcher_page, annotator_page
    family = own_family()
    set_verification_on_the_family_page(page, live_server, family)
    config = StageConfig.objects.get(family=family, stage=Stage.VERIFICATION)
    assert (config.aggregation, config.adaptive, config.agree_to_decide, config.overlap) == (
        Aggregation.DAWID_SKENE, True, 2, 3)

    spammer, cara, bob, cleo = (in_house(name) for name in ("spammer", "cara", "bob", "cleo"))
    ana = local_worker(get_user_model().objects.get(username="ana"))
    spammed = caption_all(spammer, text=SPAM_CAPTION, limit=2)
    caption_all(cara)
    paste_references(family)
    assert [name_of(instance) for instance in spammed] == ["astronaut", "camera"]
    # Nobody verifies a reference written from their own caption.
    assert verify_all(spammer, always_correct=True) == len(ITEMS) - 2
    assert verify_in_the_browser(ana_page, live_server, family) == len(ITEMS)
    assert Assignment.objects.filter(worker=ana, status=Assignment.Status.SUBMITTED).count() == len(ITEMS)
    # Bob gives the spammer's two captions their second verifier, and the two wrong references their
    # third, where the spammer and ana disagree.
    assert verify_all(bob) == 4
    # Every answer is in and Dawid-Skene decides in its job, not the submit: the page says so, and
    # counts nothing decided before it has run.
    step = verification_step(page, live_server, family)
    assert "undecided instances waiting: 8 for the worker-model job" in step, step
    assert "; 0 of 8 decided" in step, step
    assert worker_model_job.decide_by_worker_models() == len(ITEMS)
    assert family.instances.filter(status=Instance.Status.VERIFIED).count() == 6
    verification_step(page, live_server, family)
    shoot(page, "workflow-before-review")

    said = reject_in_the_admin(page, live_server, spammer)
    shoot(page, "rejected")
    assert f"{len(ITEMS)} answer(s) rejected" in said, said
    assert Assignment.objects.filter(worker=spammer, work_state=WorkState.REJECTED).count() == len(ITEMS)
    for instance in spammed:
        instance.refresh_from_db()
        assert instance.status == Instance.Status.AWAITING_CAPTION
        assert f"Instance #{instance.pk} leaves the benchmark" in said

    # Nothing waits forever: the two wrong references keep two agreeing counted votes and wait for the
    # job; the four the spammer helped decide ask another verifier; the spammer's captions are asked again.
    waits = waits_for(family)
    assert waits.stuck == [] and waits.counts()[Waits.WORKER_MODEL] == 2, waits
    assert waits.counts()[Waits.TASK] == 6, waits
    assert verify_all(cleo) == 4
    assert len(caption_all(cara)) == 2
    paste_references(family)
    assert worker_model_job.decide_by_worker_models() == 6
    step = verification_step(page, live_server, family)
    shoot(page, "workflow-after-review")
    assert "undecided instances waiting: 2 for a crowd task" in step, step
    # The spammer's two captions' references were withdrawn with them: neither decided nor asked about.
    assert "; 6 of 8 decided" in step, step
    assert "no next step" not in step, step
    first = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(background=False))

    page.goto(f"{live_server.url}/admin/annotation/instructionfamily/{family.pk}/change/")
    page.locator('input[name="target_instances"]').fill("10")
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(f"{live_server.url}/admin/annotation/instructionfamily/")
    assert "Target 10: 2 new task(s) made." in page.locator(".messagelist").inner_text()
    owed = WorkUnit.objects.filter(family=family, stage=Stage.INSTRUCTION_GENERATION, status=WorkUnit.Status.OPEN)
    assert owed.count() == 4  # the two discarded instances' replacements, and the two the target adds

    # Ana checks the two new references on the page; cleo only one of them, so the other waits.
    assert verify_in_the_browser(ana_page, live_server, family) == 2
    assert verify_all(cleo, limit=1) == 1
    assert worker_model_job.decide_by_worker_models() == 1

    page.goto(f"{live_server.url}/admin/annotation/snapshot/add/")
    page.locator("#id_note").fill("After review")
    page.get_by_role("button", name="Save", exact=True).click()
    page.locator(".messagelist").wait_for()
    second = Snapshot.objects.get(note="After review")
    second = snapshots.build_snapshot(snapshot=second)  # as the worker runs the build job
    page.goto(f"{live_server.url}/admin/annotation/snapshot/{second.pk}/change/")
    shoot(page, "snapshot")

    rejected_captions = list(Caption.objects.filter(assignment__work_state=WorkState.REJECTED))
    assert [caption.texts for caption in rejected_captions] == [[SPAM_CAPTION]] * 2
    discarded = list(family.instances.filter(status=Instance.Status.DISCARDED))
    assert sorted(name_of(instance) for instance in discarded) == ["coins", "hubble"]
    for snapshot in (first, second):
        texts = snapshot_texts(snapshot)
        assert not any(SPAM_CAPTION in text for text in texts.values()), snapshot
        for name in data_files(snapshot):
            for instance in discarded:
                assert instance.instruction not in texts[name], (snapshot, name)
                assert ITEMS[name_of(instance)][1] not in texts[name], (snapshot, name)
        held = {int(pk) for pk in snapshot.instance_digests}
        for reference in Reference.objects.filter(instance_id__in=held, verdict=Reference.Verdict.CORRECT):
            assert not decided_against_every_counted_vote(reference), reference
    assert len(first.instance_digests) == 4 and len(second.instance_digests) == 5

    decided = Reference.objects.filter(instance__family=family,
                                       verdict__in=[Reference.Verdict.CORRECT, Reference.Verdict.INCORRECT])
    assert not [reference for reference in decided if decided_against_every_counted_vote(reference)
                and reference.adjudicated_by_id is None]
    waits = waits_for(family)
    pending = Reference.objects.filter(instance__family=family, verdict=Reference.Verdict.PENDING)
    assert pending.count() == 1
    assert {waits.instances[reference.instance_id] for reference in pending} == {Waits.TASK}
    step = verification_step(page, live_server, family)
    shoot(page, "workflow-end")
    assert "undecided instances waiting: 1 for a crowd task" in step, step
    assert "; 7 of 8 decided" in step, step
    # Every other reference is decided, or withdrawn with the spammer's caption it was written from.
    withdrawn = Reference.objects.filter(instance__family=family, verdict=Reference.Verdict.WITHDRAWN)
    assert [reference.caption.texts for reference in withdrawn] == [[SPAM_CAPTION]] * 2
    assert decided.count() + pending.count() + withdrawn.count() == family.instances.count() + 2

    call_command("check_benchmark")
    assert page.errors == [] and ana_page.errors == []
