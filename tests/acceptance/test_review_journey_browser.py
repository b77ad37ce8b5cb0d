"""A reviewer's journey in headless Chromium: a spammer's verifications, rejected in bulk from
*Answers to review*, leave Table 2, the leaderboard and the next snapshot; their tasks go to another
worker; MTurk rejects the assignments (botocore's Stubber at the wire) and the audit log says so."""

import csv
import io
import os

import pytest
from django.contrib.auth.models import Permission, User

from annotation.crowdwork import queue
from annotation.datasets import snapshots
from annotation.models import Instance, Stage, WorkUnit
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from annotation.scoring.freshness import refresh_leaderboard
from mturk.models import AuditLog
from tests.factories import FamilyFactory, WorkerFactory
from tests.mturk_wire import assignment
from tests.review_support import verified_on_mturk
from tests.scoring_factories import create_tournament, verified_instance, with_responses

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "a-long-test-password"
REASON = ("These verifications were submitted in two seconds each, without the images opened: "
          "please read the instruction and look at the image before answering.")


def _human_preference_rows(snapshot):
    with snapshots.snapshot_storage().open(f"v{snapshot.version}/human_preferences.csv", "rb") as handle:
        return list(csv.DictReader(io.StringIO(handle.read().decode("utf-8"))))


def test_a_reviewer_rejects_a_spammers_verifications_and_every_count_follows(browser, live_server, mturk,
                                                                             tmp_path):
    family = FamilyFactory(name="Drinks")
    spammer = WorkerFactory(external_id="A1SPAMMER00000009")
    study, leases = verified_on_mturk(mturk, spammer, count=2, family=family)
    honest = verified_instance(family=family)
    for instance in [*Instance.objects.filter(status=Instance.Status.VERIFIED).exclude(pk=honest.pk), honest]:
        with_responses(instance, "llava", "otter")
    tournament = create_tournament(name="Drinks arena", include_reference=False, judgements_per_pair=1)
    launch_tournament(tournament=tournament)
    judge = WorkerFactory()
    while (lease := queue.next_assignment(worker=judge, stage=Stage.PAIRWISE)) is not None:
        submit_pairwise_judgement(assignment_id=lease.pk, worker=judge, choice="left")
    for lease in leases:
        record = assignment(assignment_id=lease.platform_assignment_id, worker_id=spammer.external_id,
                            hit_id=lease.platform_listing_id)
        mturk.expect("get_assignment", {"Assignment": record}, {"AssignmentId": lease.platform_assignment_id})
        mturk.expect("reject_assignment", {}, {"AssignmentId": lease.platform_assignment_id,
                                               "RequesterFeedback": REASON})

    reviewer = User.objects.create_user("reviewer", password=PASSWORD, is_staff=True)
    reviewer.user_permissions.add(*Permission.objects.filter(
        codename__in=["view_answer", "change_answer", "pay_workers", "view_instructionfamily",
                      "view_tournament"]))
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("reviewer")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/admin/")

    table2 = f"{live_server.url}/admin/annotation/instructionfamily/table2/"
    page.goto(table2)
    assert "References rated (n)" in page.content()
    rated = page.locator("tr", has_text="References rated (n)").locator("td").first
    assert rated.inner_text().strip() == "2"
    refresh_leaderboard(tournament=tournament)  # the background job, as a worker would run it
    page.goto(f"{live_server.url}/dashboard/tournaments/{tournament.pk}/leaderboard/")
    assert "3 battles, 3 judgements" in page.locator(".counts").first.inner_text()
    page.screenshot(path=str(tmp_path / "leaderboard-before.png"), full_page=True)

    # The spammer's answers, from the worker link on the review page, rejected in bulk.
    page.goto(f"{live_server.url}/admin/annotation/answer/?unit__stage__exact=verification")
    page.get_by_role("link", name=str(spammer)).first.click()
    page.wait_for_url(f"**worker__id__exact={spammer.pk}**")
    page.locator("#action-toggle").check()
    page.locator("select[name=action]").select_option("reject")
    page.get_by_role("button", name="Go").click()
    page.get_by_label("Reason:").fill(REASON)
    page.screenshot(path=str(tmp_path / "reject-form.png"), full_page=True)
    page.get_by_role("button", name="Reject").click()
    page.get_by_text("2 answer(s) rejected").wait_for()
    assert page.get_by_text("was rejected there").count() == 2
    page.screenshot(path=str(tmp_path / "rejected.png"), full_page=True)
    mturk.done()

    page.goto(table2)
    assert page.locator("tr", has_text="References rated (n)").locator("td").first.inner_text().strip() == "0"
    page.goto(f"{live_server.url}/dashboard/tournaments/{tournament.pk}/leaderboard/")
    # Until the job the rejection queued has run, the older numbers show, said to be computing.
    assert "Computing: the judgements have changed" in page.locator(".computing").inner_text()
    assert "3 battles, 3 judgements" in page.locator(".counts").first.inner_text()
    refresh_leaderboard(tournament=tournament)
    page.goto(f"{live_server.url}/dashboard/tournaments/{tournament.pk}/leaderboard/")
    assert "1 battle, 1 judgement" in page.locator(".counts").first.inner_text()
    page.screenshot(path=str(tmp_path / "leaderboard-after.png"), full_page=True)
    context.close()

    snapshot = snapshots.build_snapshot(snapshot=snapshots.request_snapshot(tournaments=[tournament],
                                                                            background=False))
    assert len(_human_preference_rows(snapshot)) == 1
    assert AuditLog.objects.filter(action=AuditLog.Action.REJECT, ok=True).count() == 2
    other = WorkerFactory()
    lease = queue.next_assignment(worker=other, stage=Stage.VERIFICATION)
    assert lease is not None and lease.unit_id in {lease.unit_id for lease in leases}
    assert WorkUnit.objects.get(pk=lease.unit_id).status == WorkUnit.Status.OPEN


def test_a_leaderboard_without_the_reference_shows_no_broken_heatmap(browser, live_server, django_user_model):
    # Its category heatmap is a 404 (no battle against the reference): the page says why instead.
    with_responses(verified_instance(), "llava", "otter")
    tournament = create_tournament(name="No reference", include_reference=False, judgements_per_pair=1)
    launch_tournament(tournament=tournament)
    judge = WorkerFactory()
    lease = queue.next_assignment(worker=judge, stage=Stage.PAIRWISE)
    submit_pairwise_judgement(assignment_id=lease.pk, worker=judge, choice="left")
    refresh_leaderboard(tournament=tournament)  # the background job, as a worker would run it
    django_user_model.objects.create_superuser("researcher", "r@example.org", PASSWORD)
    context = browser.new_context()
    page = context.new_page()
    failed = []
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)
    page.goto(f"{live_server.url}/admin/login/?next=/dashboard/tournaments/{tournament.pk}/leaderboard/")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_text("no win-rate per category").wait_for()
    page.wait_for_load_state("networkidle")
    context.close()
    assert [url for url in failed if not url.endswith("/favicon.ico")] == []
