"""Random sequences of the real steps of every crowd stage, checked after each step on PostgreSQL.

Launch, lease, submit, give back, expire, a late submit, a verdict that discards or sends back, a
second reference pasted, a researcher's caption, a rejection or an acceptance in review, an
adjudication, a refit of the worker models, a changed verification rule, aggregation, stopping rule
(agreement, or each verifier weighed by their accuracy), overlap or counting of provisional
answers, a raised target, a snapshot built, the sweep, a job run again, and any of them with a
database error at a random statement, with verification and battles asking a fixed overlap or
until decided. After every step: no item has more units or answers than its stage asks, no worker
answers an item twice, a stage asking until decided never buys more than its maximum, nor (but for
a rule weighing accuracies, which every refit moves) an answer after its answers decided, the
sweep leaves nothing owed and made twice, nothing a service said it stored is lost,
`check_benchmark` finds nothing (annotation/benchmark_check.py), and the counts kept for each
family no change has marked (Table 2's and the workflow pages') equal a count from scratch (and all
of them do once a researcher reads Table 2 or the workflow pages, steps of their own).
"""

import os
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from annotation.admin.family_workflow import family_workflow
from annotation.admin.tournament_workflow import tournament_workflow
from annotation.benchmark_check import violations
from annotation.collection import captions, instructions, references, verification, waiting, worker_model_job
from annotation.crowdwork import configs, leases, queue, review, stages
from annotation.crowdwork.stopping import WorkerAware, answered_labels, stopping_of
from annotation.datasets import snapshots
from annotation.exceptions import AnnotationError
from annotation.models import (
    Aggregation,
    Assignment,
    Caption,
    HumanJudgement,
    Instance,
    InstructionFamily,
    Reference,
    Stage,
    StageConfig,
    Tournament,
    Verification,
    Worker,
    WorkState,
    WorkUnit,
)
from annotation.preferences.judgements import submit_pairwise_judgement
from annotation.preferences.tournaments import launch_tournament
from tasks import outbox
from tests.factories import FamilyFactory, ImageAssetFactory
from tests.kept_counts_support import (
    assert_kept_counts_equal_a_count_from_scratch,
    assert_unmarked_counts_equal_a_count_from_scratch,
    assert_workflow_figures_equal_a_count_made_directly,
)
from tests.scoring_factories import create_tournament, verified_instance, with_responses

# Minutes of random histories: handed out first, so no worker waits on it at the end.
pytestmark = [pytest.mark.django_db, pytest.mark.slow]

COLLECTION_STAGES = (Stage.INSTRUCTION_GENERATION, Stage.CAPTION, Stage.VERIFICATION)
ALL_STAGES = (*COLLECTION_STAGES, Stage.PAIRWISE)
WORKERS = 5
# The suite draws a few histories each run; benchmarks/owed_work_histories.py draws thousands.
EXAMPLES = int(os.environ.get("OWED_WORK_EXAMPLES", "25"))


class InjectedFault(OperationalError):
    """What a lost connection raises, at the statement the step chose."""


def fail_at(statement):
    seen = [0]

    def wrapper(execute, sql, params, many, context):
        seen[0] += 1
        if seen[0] == statement:
            raise InjectedFault(f"database lost at statement {statement}")
        return execute(sql, params, many, context)

    return wrapper


class OwedWork(RuleBasedStateMachine):
    """One family through the collection stages, and one tournament's battles, under random steps."""

    def __init__(self):
        super().__init__()
        # Each example in a savepoint of the test's transaction, rolled back at its end.
        self.atomic = transaction.atomic()
        self.atomic.__enter__()
        self.family = FamilyFactory(target_instances=3)
        self.workers = [Worker.objects.create(platform=Worker.Platform.LOCAL, external_id=f"w{n}")
                        for n in range(WORKERS)]
        self.arena = FamilyFactory()
        for _ in range(2):
            with_responses(verified_instance(family=self.arena), "model-x", "model-y", "model-z")
        self.tournament = create_tournament(name="arena", families=[self.arena], include_reference=False,
                                            judgements_per_pair=2)
        self.reviewer = get_user_model().objects.create_user(username="reviewer")
        self.snapshots_built = False
        self.stored = {}  # assignment id -> the answer's model, for what a service said it stored
        self.answers = 0

    def teardown(self):
        transaction.set_rollback(True)
        self.atomic.__exit__(None, None, None)

    # --- the steps ------------------------------------------------------------------------------

    def _step(self, action, fault_at=None):
        """Run a step as one request or job would: in a transaction of its own, with a database
        error at statement `fault_at` when asked. A refused step (AnnotationError) is expected."""
        try:
            with transaction.atomic():
                if fault_at is None:
                    return action()
                with connection.execute_wrapper(fail_at(fault_at)):
                    return action()
        except (AnnotationError, InjectedFault):
            return None

    def _launch(self, stage, overlap):
        if stage == Stage.PAIRWISE:
            launch_tournament(tournament=self.tournament)
            return
        if stage == Stage.INSTRUCTION_GENERATION:
            overlap = 1
        # Launched again, a stage's overlap is raised, never lowered (as in `_change_rule`).
        launched = StageConfig.objects.filter(family=self.family, stage=stage, launched_at__isnull=False).first()
        if launched is not None:
            overlap = max(overlap, launched.overlap)
        stages.launch_stage(family=self.family, stage=stage, overlap=overlap)

    def _lease(self, worker, stage):
        return queue.next_assignment(worker=worker, stage=stage)

    def _submit(self, worker, stage, verdict, late=False):
        held = Assignment.objects.filter(worker=worker, unit__stage=stage).exclude(
            status__in=[Assignment.Status.SUBMITTED, Assignment.Status.RETURNED])
        if not late:
            held = held.filter(status=Assignment.Status.LEASED, lease_expires_at__gt=timezone.now())
        assignment = held.select_related("unit").order_by("pk").first()
        if assignment is None:
            return None
        if stage == Stage.INSTRUCTION_GENERATION:
            answer = instructions.submit_instruction(
                assignment_id=assignment.pk, worker=worker, images=[ImageAssetFactory()],
                instruction=f"What is unusual here? ({worker.external_id}, {assignment.pk})")
        elif stage == Stage.CAPTION:
            answer = captions.submit_caption(
                assignment_id=assignment.pk, worker=worker,
                texts=[f"A long caption of the picture by {worker.external_id}, task {assignment.pk}."])
        elif stage == Stage.VERIFICATION:
            problems = {"correct": {}, "response": {"problem_in_response": True},
                        "caption": {"problem_in_caption": True}}[verdict]
            answer = verification.submit_verification(assignment_id=assignment.pk, worker=worker,
                                                      is_correct=verdict == "correct", **problems)
        else:
            answer = submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice="left")
        return assignment.pk, answer

    def _reference(self, second):
        wanted = Instance.Status.AWAITING_VERIFICATION if second else Instance.Status.AWAITING_REFERENCE
        instance = self.family.instances.filter(status=wanted).order_by("pk").first()
        if instance is not None:
            references.add_manual_reference(instance=instance, text=f"The answer, take {second}.", user=None)

    def _researcher_caption(self):
        instance = self.family.instances.filter(status=Instance.Status.AWAITING_CAPTION).order_by("pk").first()
        if instance is not None:
            captions.add_caption(instance=instance, texts=["A caption the researcher wrote by hand."])

    def _sweep(self):
        # What the beat's sweep queues, run as the jobs run it; with no model configured, a
        # researcher's pasted reference stands for the reference job.
        for name, args, *_ in outbox.owed_jobs():
            if name == "tasks.create_work_units":
                family_id, stage = args
                stages.create_work_units(family=InstructionFamily.objects.get(pk=family_id), stage=stage)
        for instance in self.family.instances.filter(status=Instance.Status.AWAITING_REFERENCE):
            references.add_manual_reference(instance=instance, text="The answer.", user=None)

    def _rerun(self, stage):
        family = self.arena if stage == Stage.PAIRWISE else self.family
        stages.create_work_units(family=family, stage=stage)

    def _expire(self):
        Assignment.objects.filter(status=Assignment.Status.LEASED).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1))
        leases.expire_leases()

    def _give_back(self, worker):
        leases.return_held(worker=worker)

    def _reject(self, worker):
        answer = Assignment.objects.filter(worker=worker, status=Assignment.Status.SUBMITTED).exclude(
            work_state=WorkState.REJECTED).order_by("-pk").first()
        if answer is not None:
            review.reject_work(assignments=[answer], reason="Careless.")

    def _accept(self, worker):
        answer = Assignment.objects.filter(worker=worker, status=Assignment.Status.SUBMITTED,
                                           work_state=WorkState.PROVISIONAL).order_by("pk").first()
        if answer is not None:
            review.accept_work(assignments=[answer], reviewer=self.reviewer)

    def _adjudicate(self, is_correct):
        reference = (Reference.objects.filter(instance__family=self.family)
                     .exclude(verdict=Reference.Verdict.WITHDRAWN).order_by("-pk").first())
        if reference is not None:
            problems = {} if is_correct else {"problem_in_response": True}
            verification.adjudicate(reference=reference, reviewer=self.reviewer, is_correct=is_correct,
                                    note="Looked at the picture.", **problems)

    def _refit(self):
        worker_model_job.decide_by_worker_models()

    def _change_rule(self, rule, aggregation, overlap, counts_provisional, stopping=StageConfig.Stopping.AGREEMENT,
                     threshold=0.95):
        config = StageConfig.objects.get(family=self.family, stage=Stage.VERIFICATION)
        before = {name: getattr(config, name) for name in configs.APPLIED_FIELDS}
        config.verification_rule, config.aggregation, config.stopping = rule, aggregation, stopping
        # At 0.7 one answer of a worker at the prior decides, and a refit can take that back.
        config.posterior_threshold = threshold
        # Raised, never lowered: answers bought under a higher overlap stay, beyond what the invariants
        # above allow a stage to ask.
        config.overlap, config.counts_provisional = max(overlap, config.overlap), counts_provisional
        config.model_min_answers = 1
        config.save()
        configs.apply_stage_config(config=config, before=before)

    def _raise_target(self):
        InstructionFamily.objects.filter(pk=self.family.pk).update(target_instances=F("target_instances") + 1)
        self.family.refresh_from_db()
        waiting.settle_family(self.family)

    def _snapshot(self):
        snapshots.build_snapshot(snapshot=snapshots.request_snapshot(note="a history's snapshot", background=False))
        self.snapshots_built = True

    def _run(self, step, fault_at):
        kind, arguments = step
        if kind == "submit":
            result = self._step(lambda: self._submit(*arguments), fault_at)
            if result is not None:
                assignment_id, answer = result
                self.stored[assignment_id] = type(answer)
            return
        action = {
            "launch": self._launch, "lease": self._lease, "reference": self._reference,
            "researcher_caption": self._researcher_caption, "sweep": self._sweep, "rerun": self._rerun,
            "expire": self._expire, "give_back": self._give_back, "reject": self._reject,
            "accept": self._accept, "adjudicate": self._adjudicate, "refit": self._refit,
            "change_rule": self._change_rule, "raise_target": self._raise_target, "snapshot": self._snapshot,
        }[kind]
        self._step(lambda: action(*arguments), fault_at)

    worker_numbers = st.integers(0, WORKERS - 1)
    verdicts = st.sampled_from(["correct", "response", "caption"])
    steps = st.one_of(
        st.tuples(st.just("launch"), st.tuples(st.sampled_from(ALL_STAGES), st.integers(1, 3))),
        st.tuples(st.just("lease"), st.tuples(worker_numbers, st.sampled_from(ALL_STAGES))),
        st.tuples(st.just("submit"), st.tuples(worker_numbers, st.sampled_from(ALL_STAGES), verdicts,
                                               st.booleans())),
        st.tuples(st.just("reference"), st.tuples(st.booleans())),
        st.tuples(st.just("researcher_caption"), st.just(())),
        st.tuples(st.just("sweep"), st.just(())),
        st.tuples(st.just("rerun"), st.tuples(st.sampled_from(ALL_STAGES))),
        st.tuples(st.just("expire"), st.just(())),
        st.tuples(st.just("give_back"), st.tuples(worker_numbers)),
        st.tuples(st.just("reject"), st.tuples(worker_numbers)),
        st.tuples(st.just("accept"), st.tuples(worker_numbers)),
        st.tuples(st.just("adjudicate"), st.tuples(st.booleans())),
        st.tuples(st.just("refit"), st.just(())),
        st.tuples(st.just("change_rule"), st.tuples(
            st.sampled_from(StageConfig.VerificationRule.values),
            st.sampled_from([Aggregation.VOTES, Aggregation.DAWID_SKENE]), st.integers(1, 3), st.booleans(),
            st.sampled_from(StageConfig.Stopping.values), st.sampled_from([0.7, 0.95]))),
        st.tuples(st.just("raise_target"), st.just(())),
        st.tuples(st.just("snapshot"), st.just(())),
    )

    def _with_workers(self, step):
        kind, arguments = step
        if kind in ("lease", "submit", "give_back", "reject", "accept"):
            return kind, (self.workers[arguments[0]], *arguments[1:])
        return step

    @initialize(caption_overlap=st.integers(1, 3), verification_overlap=st.integers(1, 3),
                rule=st.sampled_from(StageConfig.VerificationRule.values), tournament=st.booleans(),
                adaptive=st.booleans())
    def launch_everything(self, caption_overlap, verification_overlap, rule, tournament, adaptive):
        # Work to do from the first step: the stages launched as a researcher would, one instance
        # already written (imported), the tournament's battles out or not yet.
        self.family.instances.create(instruction="What is the man on the left about to do?")
        self._launch(Stage.INSTRUCTION_GENERATION, 1)
        self._launch(Stage.CAPTION, caption_overlap)
        self._launch(Stage.VERIFICATION, verification_overlap)
        StageConfig.objects.filter(family=self.family, stage=Stage.VERIFICATION).update(
            verification_rule=rule, on_incorrect=StageConfig.IncorrectAction.RECAPTION)
        if adaptive:
            # Ask until decided: two agreeing verifiers of up to three; a battle until the posterior
            # for one side passes 0.9 (three judgements at least), up to four.
            StageConfig.objects.filter(family=self.family, stage=Stage.VERIFICATION).update(
                adaptive=True, agree_to_decide=2, overlap=3)
            Tournament.objects.filter(pk=self.tournament.pk).update(adaptive=True, posterior_threshold=0.9,
                                                                    judgements_per_pair=4)
            self.tournament.refresh_from_db()
        if tournament:
            self._launch(Stage.PAIRWISE, 0)
        self._sweep()

    @rule(worker=worker_numbers, stage=st.sampled_from(ALL_STAGES), verdict=verdicts)
    def lease_and_submit(self, worker, stage, verdict):
        self._run(("lease", (self.workers[worker], stage)), None)
        self._run(("submit", (self.workers[worker], stage, verdict, False)), None)

    @rule(worker=worker_numbers, stage=st.sampled_from(ALL_STAGES), verdict=verdicts)
    def another_lease_and_submit(self, worker, stage, verdict):
        self.lease_and_submit(worker, stage, verdict)

    @rule(step=steps)
    def act(self, step):
        self._run(self._with_workers(step), None)

    @rule(step=steps, statement=st.integers(1, 40))
    def act_with_a_database_error(self, step, statement):
        self._run(self._with_workers(step), statement)

    @precondition(lambda self: StageConfig.objects.filter(launched_at__isnull=False).exists())
    @rule()
    def sweep_leaves_nothing_owed(self):
        self._sweep()
        for config in StageConfig.objects.filter(launched_at__isnull=False).select_related("family"):
            assert stages.owed_units(family=config.family, stage=config.stage) == [], config
        assert not [job for job in outbox.owed_jobs() if job[0] == "tasks.create_work_units"]

    @rule()
    def read_table2(self):
        assert_kept_counts_equal_a_count_from_scratch()

    @rule()
    def read_the_workflow_pages(self):
        family_workflow(self.family)
        tournament_workflow(self.tournament)
        assert_kept_counts_equal_a_count_from_scratch()
        assert_workflow_figures_equal_a_count_made_directly([self.family])
        assert_workflow_figures_equal_a_count_made_directly([self.arena])

    # --- what must hold after every step -----------------------------------------------------------

    @invariant()
    def kept_counts_unmarked_equal_a_count_from_scratch(self):
        # Every count the database keeps: Table 2's and the workflow pages'.
        assert_unmarked_counts_equal_a_count_from_scratch()

    @invariant()
    def the_benchmark_check_finds_nothing(self):
        # Every item decided on counted work, none against every vote unseen, none without a next step.
        # The built snapshots' sheets are read back too, once a history has built one.
        found = violations(families=InstructionFamily.objects.filter(pk=self.family.pk),
                           snapshots=self.snapshots_built)
        assert found == [], [str(violation) for violation in found]

    @invariant()
    def no_item_has_more_units_than_its_stage_asks(self):
        rounds = dict(self.family.instances.values_list("pk", "caption_round"))
        units = WorkUnit.objects.filter(stage=Stage.CAPTION).values("instance").annotate(n=Count("pk"))
        assert all(row["n"] <= rounds.get(row["instance"], 0) for row in units), list(units)
        for stage, item in ((Stage.VERIFICATION, "reference"), (Stage.PAIRWISE, "battle")):
            of_stage = WorkUnit.objects.filter(stage=stage)
            assert of_stage.values(item).distinct().count() == of_stage.count(), stage
        # A slot closed before anybody answered it, because a discarded instance came back and took
        # its room (stages.trim_open_slots), was asked of nobody and paid to nobody.
        answered = Assignment.objects.filter(unit=OuterRef("pk"), status=Assignment.Status.SUBMITTED)
        slots = WorkUnit.objects.filter(stage=Stage.INSTRUCTION_GENERATION).exclude(
            Q(status=WorkUnit.Status.CANCELLED) & ~Exists(answered)).count()
        discarded = self.family.instances.filter(status=Instance.Status.DISCARDED).count()
        assert slots <= self.family.target_instances + discarded

    @invariant()
    def no_item_has_more_answers_than_its_stage_asks(self):
        # One unit per item (above), and no unit with more answers than its overlap: answers that
        # count, since a rejected one gives its slot back.
        answered = Count("assignments", filter=Q(assignments__status=Assignment.Status.SUBMITTED)
                         & ~Q(assignments__work_state=WorkState.REJECTED))
        assert not WorkUnit.objects.annotate(n=answered).filter(n__gt=F("overlap")).exists()
        captions_per_unit = Caption.objects.filter(assignment__isnull=False) \
            .exclude(assignment__work_state=WorkState.REJECTED).values("assignment__unit") \
            .annotate(n=Count("pk"), overlap=F("assignment__unit__overlap")).filter(n__gt=F("overlap"))
        assert not captions_per_unit.exists()
        live = self.family.instances.exclude(status=Instance.Status.DISCARDED).count()
        assert live <= self.family.target_instances

    @invariant()
    def asking_until_decided_buys_nothing_after_a_decision_nor_beyond_its_maximum(self):
        if not (StageConfig.objects.filter(adaptive=True).exists() or self.tournament.adaptive):
            return
        for unit in WorkUnit.objects.filter(stage__in=[Stage.VERIFICATION, Stage.PAIRWISE], surplus=False) \
                .select_related("battle__tournament"):
            stopping = stopping_of(unit)
            if stopping is None:
                continue
            rule, maximum = stopping
            labels = answered_labels(unit, rule)
            assert unit.overlap <= maximum and len(labels) <= maximum, (unit, unit.status, labels)
            if not isinstance(rule, WorkerAware):
                # A weighed rule reads accuracies that every refit moves: whether its last answer
                # was needed was a fact of the accuracies when it came, which nothing keeps.
                assert rule.decision(labels[:-1]) is None, (unit, labels)

    @invariant()
    def no_worker_answers_an_item_twice(self):
        for model, item, who in ((Caption, "instance", "author"), (Verification, "reference", "worker"),
                                 (HumanJudgement, "battle", "worker")):
            rows = model.objects.filter(**{f"{who}__isnull": False})
            assert rows.values(item, who).distinct().count() == rows.count(), model
        # Held, not only answered: two leases of one worker on one item would both be paid.
        for stage, item in ((Stage.CAPTION, "unit__instance"), (Stage.VERIFICATION, "unit__reference"),
                            (Stage.PAIRWISE, "unit__battle")):
            of_stage = Assignment.objects.filter(unit__stage=stage)
            assert of_stage.values(item, "worker").distinct().count() == of_stage.count(), stage

    @invariant()
    def nothing_stored_is_lost(self):
        submitted = Assignment.objects.filter(pk__in=list(self.stored), status=Assignment.Status.SUBMITTED)
        assert submitted.count() == len(self.stored)
        for model, link in ((Caption, "assignment"), (Verification, "assignment"), (HumanJudgement, "assignment"),
                            (Instance, "instruction_submission__assignment")):
            expected = {pk for pk, kind in self.stored.items() if kind is model}
            assert model.objects.filter(**{f"{link}__in": expected}).count() == len(expected), model


def test_every_stage_owes_each_unit_once_whatever_the_order_of_steps(request, tmp_path):
    request.getfixturevalue("settings").MEDIA_ROOT = tmp_path
    # Its snapshots in a folder of its own: in the checkout's var/snapshots another worker's test
    # wrote and removed its own "v1" meanwhile, and a built snapshot's sheet vanished under the check.
    request.getfixturevalue("snapshot_folder")
    run_state_machine_as_test(
        OwedWork,
        settings=settings(max_examples=EXAMPLES, stateful_step_count=50, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow]),
    )


def _replay(history, **launch):
    """Run `history` (rule name, arguments) through the state machine, checking every invariant
    after each step, as Hypothesis does."""
    machine = OwedWork()
    invariants = [getattr(machine, name) for name, member in vars(OwedWork).items()
                  if getattr(member, "hypothesis_stateful_invariant", None) is not None]
    assert len(invariants) == 7
    try:
        machine.launch_everything(**launch)
        for rule_name, arguments in [("launch_everything", launch), *history]:
            if rule_name != "launch_everything":
                getattr(machine, rule_name)(**arguments)
            for check in invariants:
                check()
    finally:
        machine.teardown()


def test_a_rejected_vote_that_undoes_a_new_caption_round_leaves_one_unit_per_round():
    # Issue 35's falsifying history: a "problem in the caption" vote begins a second caption round,
    # and rejecting that vote takes the round back while nobody was asked for it.
    IG, CAP, VER, PW = Stage.INSTRUCTION_GENERATION, Stage.CAPTION, Stage.VERIFICATION, Stage.PAIRWISE
    history = [
        ("act_with_a_database_error", {"statement": 1, "step": ("launch", (IG, 1))}),
        ("act_with_a_database_error", {"statement": 1, "step": ("launch", (IG, 2))}),
        ("act_with_a_database_error", {"statement": 4, "step": ("launch", (VER, 1))}),
        ("lease_and_submit", {"stage": IG, "verdict": "correct", "worker": 3}),
        ("act", {"step": ("launch", (IG, 3))}),
        ("another_lease_and_submit", {"stage": CAP, "verdict": "correct", "worker": 2}),
        ("act", {"step": ("launch", (IG, 1))}),
        ("act", {"step": ("launch", (VER, 1))}),
        ("lease_and_submit", {"stage": VER, "verdict": "response", "worker": 1}),
        ("lease_and_submit", {"stage": PW, "verdict": "response", "worker": 4}),
        ("lease_and_submit", {"stage": PW, "verdict": "response", "worker": 2}),
        ("another_lease_and_submit", {"stage": IG, "verdict": "correct", "worker": 4}),
        ("another_lease_and_submit", {"stage": CAP, "verdict": "response", "worker": 0}),
        ("act_with_a_database_error", {"statement": 36, "step": ("reference", (False,))}),
        ("another_lease_and_submit", {"stage": IG, "verdict": "caption", "worker": 4}),
        ("act", {"step": ("submit", (2, PW, "response", True))}),
        ("act", {"step": ("researcher_caption", ())}),
        ("act_with_a_database_error", {"statement": 10, "step": ("lease", (4, IG))}),
        ("act", {"step": ("reject", (4,))}),
        ("act", {"step": ("sweep", ())}),
        ("another_lease_and_submit", {"stage": VER, "verdict": "caption", "worker": 0}),
        ("act_with_a_database_error", {"statement": 27, "step": ("lease", (3, VER))}),
        ("act", {"step": ("reject", (0,))}),
    ]
    _replay(history, caption_overlap=2, verification_overlap=1, rule="unanimous", adaptive=False,
            tournament=True)


def test_a_discarded_instance_adjudicated_correct_closes_its_untouched_replacement_and_owes_no_more():
    # A falsifying history of 2026-11-28: the instance discarded, its replacement slot made and
    # untouched, then adjudicated correct; the slot is closed for nobody, and no more are owed.
    IG, CAP, VER, PW = Stage.INSTRUCTION_GENERATION, Stage.CAPTION, Stage.VERIFICATION, Stage.PAIRWISE
    history = [
        ("act", {"step": ("adjudicate", (True,))}),
        ("act", {"step": ("researcher_caption", ())}),
        ("act", {"step": ("researcher_caption", ())}),
        ("act", {"step": ("change_rule", ("majority", Aggregation.DAWID_SKENE, 1, False))}),
        ("act", {"step": ("sweep", ())}),
        ("act", {"step": ("accept", (0,))}),
        ("act", {"step": ("lease", (1, CAP))}),
        ("act", {"step": ("submit", (2, PW, "caption", False))}),
        ("act", {"step": ("launch", (PW, 3))}),
        ("act", {"step": ("reject", (1,))}),
        ("act", {"step": ("give_back", (3,))}),
        ("act", {"step": ("refit", ())}),
        ("act", {"step": ("submit", (4, IG, "caption", True))}),
        ("act", {"step": ("change_rule", ("majority", Aggregation.DAWID_SKENE, 3, False))}),
        ("act", {"step": ("rerun", (VER,))}),
        ("act", {"step": ("adjudicate", (False,))}),
        ("act", {"step": ("researcher_caption", ())}),
        ("act", {"step": ("snapshot", ())}),
        ("act", {"step": ("adjudicate", (False,))}),
        ("act", {"step": ("snapshot", ())}),
        ("act", {"step": ("lease", (1, PW))}),
        ("act", {"step": ("accept", (1,))}),
        ("act", {"step": ("submit", (2, VER, "caption", False))}),
        ("act", {"step": ("adjudicate", (True,))}),
    ]
    _replay(history, caption_overlap=3, verification_overlap=1, rule="unanimous", adaptive=True, tournament=False)
