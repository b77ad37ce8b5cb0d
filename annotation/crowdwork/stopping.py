"""Ask until decided (issue 26): how many answers a unit asks when its stage stops once its answers
decide, instead of asking a fixed overlap.

A stopping rule reads a unit's answers as labels and says what they decide, or None while they do
not. A unit under a rule asks the fewest answers that could decide it (its answers so far and as
many more as would decide if they all sided with the leading label), never more than its stage's
maximum: two verifiers at first, a third only when the two disagree. The queue leases up to what a
unit asks (`WorkUnit.overlap`), so it hands out only units that still need an answer, and a unit
closes when its answers reach it. A rule is a class with `labels`, `decision(answers)`, what it
reads of (label, worker id) pairs (`read`), its leading label and what one more answer for it
would look like (`more`).

Worker-aware stopping (issue 41) weighs each verifier's answer by their accuracy
(annotation/workforce/accuracy.py), so a good verifier's answer decides alone and a poor one's
asks for more.
"""

import math
from collections import Counter

from django.db.models import Exists, OuterRef, Q

from annotation.models import (
    GoldAnswer,
    HumanJudgement,
    QualificationAttempt,
    Stage,
    StageConfig,
    Verification,
    WorkerBlock,
    WorkerQualification,
    WorkUnit,
)
from annotation.workforce.accuracy import verifier_accuracies

# The least and the most an answer may be trusted. A worker below a coin toss on yes/no is a
# spammer or misread the task, not a reliable contrarian, so their answer counts for nothing
# rather than against itself; none counts as never wrong.
MOST_TRUSTED = 0.99
# How far below its threshold a posterior may fall from rounding alone and still have reached it:
# one answer of a worker right 0.7 of the time is worth exactly 0.7, which the sums of logs put a
# hair above or below 0.7 as they happen to round, so a threshold of 0.7 decided on some machines'
# arithmetic and not on others.
ROUNDING = 1e-9
# The least a label's share may be, as a part of an even share: a yes/no stage starts from at most
# 9 to 1 for the commoner verdict, however lopsided the fit that estimated it.
LEAST_SHARE = 0.2


class VoteRule:
    """A rule that reads answers as bare labels: the leading label is the most frequent."""

    labels = (True, False)

    def read(self, said):
        return [label for label, _ in said]

    def leading(self, answers):
        return Counter(answers).most_common(1)[0][0] if answers else self.labels[0]

    def more(self, label):
        return label


class Agreement(VoteRule):
    """Decided once `agree` answers say the same (verification: two agreeing of up to three)."""

    def __init__(self, agree):
        self.agree = agree

    def decision(self, answers):
        if not answers:
            return None
        label, count = Counter(answers).most_common(1)[0]
        return label if count >= self.agree else None


class WorkerAware:
    """Decided once one label's posterior passes `threshold`, each answer weighed by its worker's
    accuracy: right with that probability, a wrong answer spread over the other labels, even odds
    before any answer. `by_truth` weighs instead by the worker's accuracy on items of each truth,
    where their evidence tells those apart (`Accuracy.by_truth`), starting from how common each
    label is (`shares`, the worker model's estimate): a verifier who passes most references is
    believed when they fail one, and less when they pass it. Answers are (label, accuracy) pairs,
    an accuracy being a probability or an Accuracy; an unknown worker's is `prior`. One more answer
    could come from the most trusted worker, so while undecided a unit mostly asks one more at a
    time."""

    def __init__(self, threshold, prior, labels=(True, False), enough=5, by_truth=False, shares=None):
        self.threshold = threshold
        self.prior = prior
        self.labels = tuple(labels)
        self.enough = enough
        self.by_truth = by_truth
        self.shares = _bounded_shares(shares or {}, self.labels) if by_truth else {}

    def read(self, said):
        """(label, worker id) pairs as (label, Accuracy), in one query for every worker's evidence,
        which also says how common each label is (kept as the rule's `shares` when it weighs by
        truth)."""
        evidence = verifier_accuracies([worker for _, worker in said], prior=self.prior, enough=self.enough)
        if self.by_truth and evidence.shares:
            self.shares = _bounded_shares(evidence.shares, self.labels)
        return [(label, evidence.of.get(worker, self.prior)) for label, worker in said]

    def _bounded(self, accuracy):
        return min(max(accuracy, 1 / len(self.labels)), MOST_TRUSTED)

    def _likelihood(self, said, accuracy, truth):
        """How likely a worker of `accuracy` says `said` of an item whose truth is `truth`."""
        if not self.by_truth:
            right = self._bounded(accuracy.value if hasattr(accuracy, "on") else accuracy)
            return right if said == truth else (1 - right) / (len(self.labels) - 1)
        # By truth an answer is as likely as the worker's accuracy on its own label, and never less
        # likely than under another truth: a worker who says "correct" of everything (right on every
        # sound reference, on no flawed one) tells nothing, rather than their "correct" counting
        # for it or their rare "incorrect" against it.
        kept = self._on(accuracy, said)
        if said == truth:
            return kept
        return min((1 - self._on(accuracy, truth)) / (len(self.labels) - 1), kept)

    @staticmethod
    def _on(accuracy, truth):
        on = accuracy.on(truth) if hasattr(accuracy, "on") else accuracy
        return min(max(on, 1 - MOST_TRUSTED), MOST_TRUSTED)

    def posteriors(self, answers):
        labels = list(self.labels) + [label for label, _ in answers if label not in self.labels]
        even = 1 / len(self.labels)
        scores = {label: math.log(self.shares.get(label, even)) for label in labels}
        for said, accuracy in answers:
            for truth in labels:
                scores[truth] += math.log(self._likelihood(said, accuracy, truth))
        top = max(scores.values())
        odds = {label: math.exp(score - top) for label, score in scores.items()}
        total = sum(odds.values())
        return {label: value / total for label, value in odds.items()}

    def leading(self, answers):
        """The most probable label; a tie goes to the first answer's."""
        posteriors = self.posteriors(answers)
        order = [label for label, _ in answers] + list(self.labels)
        return max(order, key=lambda label: (posteriors[label], -order.index(label)))

    def decision(self, answers):
        if not answers:
            return None
        label = self.leading(answers)
        return label if self.posteriors(answers)[label] >= self.threshold - ROUNDING else None

    def more(self, label):
        return (label, MOST_TRUSTED)


def _bounded_shares(shares, labels):
    """`shares` of `labels`, none below LEAST_SHARE of an even share (what the others hold above
    that is scaled to make room): a fit that finds a label (nearly) never the truth must not let
    one answer for another decide alone."""
    if not shares:
        return {}
    least = LEAST_SHARE / len(labels)
    above = {label: max(shares.get(label, 0.0) - least, 0.0) for label in labels}
    total = sum(above.values())
    if total <= 0:
        return {}
    scale = (1 - least * len(labels)) / total
    return {label: least + value * scale for label, value in above.items()}


class _BattlePosterior(VoteRule):
    """A battle's rule: decided once `preferred_a` (a posterior for response A) passes `threshold`,
    or falls below one minus it (B)."""

    labels = ("model_a", "model_b")

    def decision(self, answers):
        p = self.preferred_a(answers)
        if p >= self.threshold - ROUNDING:
            return "model_a"
        if 1 - p >= self.threshold - ROUNDING:
            return "model_b"
        return None


class BetaPosterior(_BattlePosterior):
    """Decided once the Beta-Binomial posterior that A is preferred (uniform prior) passes
    `threshold`, or falls below one minus it (B is preferred)."""

    def __init__(self, threshold):
        self.threshold = threshold

    def preferred_a(self, answers):
        # Loaded by the first battle that asks until decided, not when a web worker starts: the
        # workers that serve annotators stay without the scientific stack otherwise.
        from scipy.stats import beta

        a = sum(1 for answer in answers if answer == "model_a")
        return float(beta.sf(0.5, 1 + a, 1 + len(answers) - a))


class OneCoinPosterior(_BattlePosterior):
    """Decided once the posterior that A is the better response passes `threshold`, or falls below
    one minus it, each judgement taken as right with probability `accuracy` (a one-coin worker
    model, even prior): the odds are (accuracy / (1 - accuracy)) to the power of A's lead.

    The Beta-Binomial posterior asks whether the crowd prefers A, which a unanimous three barely
    settles (0.94) and a 3-1 does not (0.81), so it mostly runs to its maximum; this asks which
    response is better, which a lead of two settles at accuracy 0.8 and threshold 0.9 (0.94)."""

    def __init__(self, threshold, accuracy):
        self.threshold = threshold
        self.accuracy = accuracy

    def preferred_a(self, answers):
        lead = sum(1 if answer == "model_a" else -1 for answer in answers)
        return 1.0 / (1.0 + ((1.0 - self.accuracy) / self.accuracy) ** lead)


def battle_rule(tournament):
    """The stopping rule of a tournament that asks until decided: the one-coin posterior when it
    states how often a judgement is right, else the Beta-Binomial posterior."""
    if tournament.judgement_accuracy is not None:
        return OneCoinPosterior(tournament.posterior_threshold, tournament.judgement_accuracy)
    return BetaPosterior(tournament.posterior_threshold)


def battle_posterior_text(tournament):
    """What a tournament's battles stop on, in words for its pages."""
    if tournament.judgement_accuracy is not None:
        return (f"the posterior that one response is the better one, each judgement right "
                f"{tournament.judgement_accuracy:.0%} of the time")
    return "the posterior that the crowd prefers one side"


def stated_accuracy_warning(tournament):
    """Why the judgement accuracy a tournament states is not to be trusted, or "": the one-coin rule
    calls a battle decided on it, and an accuracy above the crowd's calls battles too early (on two
    real crowds right 64% and 69% of the time, battles decided at 0.9 with 0.8 stated were right 72%
    and 83% of the time). It is checked against the checked gold answers of the pairwise stage (its
    qualification test and the gold mixed into live work) by the workers who judged this
    tournament, or before anybody has by the crowd that may judge it (workers qualified, not paused
    and not blocked, their failed attempts at the test left out): the warning stands while the stated
    accuracy lies outside their 95% (Wilson) interval."""
    stated = tournament.judgement_accuracy
    if stated is None or not tournament.adaptive:
        return ""
    checked = GoldAnswer.objects.filter(item__qualification__stage=Stage.PAIRWISE, correct__isnull=False)
    judges = HumanJudgement.objects.filter(tournament=tournament).values("worker")
    whose = "its judges'"
    if checked.filter(worker__in=judges).exists():
        checked = checked.filter(worker__in=judges)
    else:
        whose = "the crowd's"
        may_judge = WorkerQualification.objects.filter(worker=OuterRef("worker"),
                                                       qualification=OuterRef("item__qualification"),
                                                       status=WorkerQualification.Status.QUALIFIED)
        blocked = WorkerBlock.objects.filter(worker=OuterRef("worker"), active=True)
        checked = checked.filter(Exists(may_judge), ~Exists(blocked)).exclude(
            Q(source=GoldAnswer.Source.TEST, attempt__isnull=False)
            & ~Q(attempt__status=QualificationAttempt.Status.PASSED))
    answers = checked.count()
    if not answers:
        return ""
    right = checked.filter(correct=True).count()
    # Here, so that the admin's pages that never warn do not load SciPy.
    from scipy.stats import binomtest

    interval = binomtest(right, answers).proportion_ci(confidence_level=0.95, method="wilson")
    if interval.low <= stated <= interval.high:
        return ""
    seen = right / answers
    # A tournament states an accuracy strictly between a coin toss and never wrong: the one-coin
    # rule means nothing at a half and divides by nothing at one.
    advice = ("Their judgements are no better than a coin toss on gold: leave the judgement accuracy empty to ask "
              "whether the crowd prefers one side instead, and look at who is judging."
              if seen <= 0.5 else
              f"Set the judgement accuracy to about {min(max(seen, 0.51), 0.99):.2f}, or leave it empty to ask "
              "whether the crowd prefers one side instead.")
    return (f"This tournament calls a battle decided taking each judgement to be right {stated:.0%} of the time, "
            f"but {whose} gold answers on the pairwise stage were right {right} of {answers} times "
            f"({seen:.0%}, 95% interval {interval.low:.0%} to {interval.high:.0%}): "
            + ("battles are called decided too early. " if stated > interval.high
               else "battles are asked more judgements than they need. ")
            + advice)


def locked_unit(*, pk, stage):
    """The unit, locked, with what asking reads: a battle's tournament only for a battle, so a
    caption's or a verification's submit joins no tournament tables (PostgreSQL plans every join
    of a statement each time it is sent)."""
    related = ("battle__tournament",) if stage == Stage.PAIRWISE else ()
    return WorkUnit.objects.select_for_update(of=("self",)).select_related(*related).get(pk=pk)


def answers_to_ask(rule, answers, maximum):
    """The fewest answers that could decide, given `answers` so far, up to `maximum`: as many as
    are in once they decide or reach the maximum."""
    answers = list(answers)
    if len(answers) >= maximum or rule.decision(answers) is not None:
        return max(len(answers), 1)
    leader = rule.more(rule.leading(answers))
    for more in range(1, maximum - len(answers)):
        if rule.decision(answers + [leader] * more) is not None:
            return len(answers) + more
    return maximum


def verification_stopping(config):
    """The stopping rule of a verification stage that asks until decided (`config.adaptive`)."""
    if config.stopping in StageConfig.WEIGHED_STOPPING:
        return WorkerAware(config.posterior_threshold, config.prior_accuracy, enough=config.model_min_answers,
                           by_truth=config.stopping == StageConfig.Stopping.WORKER_ACCURACY_BY_VERDICT)
    return Agreement(config.agree_to_decide)


def stopping_of(unit):
    """(rule, maximum) of the unit's stage when it asks until decided, else None."""
    if unit.stage == Stage.VERIFICATION:
        config = StageConfig.objects.filter(family_id=unit.family_id, stage=Stage.VERIFICATION).first()
        if config is not None and config.adaptive:
            return verification_stopping(config), config.overlap
    elif unit.stage == Stage.PAIRWISE and unit.battle_id is not None:
        tournament = unit.battle.tournament
        if tournament.adaptive:
            return battle_rule(tournament), tournament.judgements_per_pair
    return None


def first_ask(stopping):
    """What a new unit asks under `stopping` ((rule, maximum))."""
    rule, maximum = stopping
    return answers_to_ask(rule, [], maximum)


def answered_labels(unit, rule):
    """The unit's answers in (submitted and not rejected), as its `rule` reads them."""
    if unit.stage == Stage.VERIFICATION:
        return rule.read(list(Verification.objects.filter(assignment__in=unit.assignments.answered())
                              .order_by("pk").values_list("is_correct", "worker_id")))
    judgements = HumanJudgement.objects.filter(assignment__in=unit.assignments.answered()).order_by("pk")
    return [judgement.winner_side(judgement.choice) for judgement in judgements]


def asks_now(unit):
    """How many answers `unit` asks now: its overlap, or, when its stage asks until decided, the
    fewest of its answers in that could decide it."""
    stopping = None if unit.surplus else stopping_of(unit)
    if stopping is None:
        return unit.overlap
    rule, maximum = stopping
    return answers_to_ask(rule, answered_labels(unit, rule), maximum)


def ask_what_is_needed(unit):
    """Set an open unit's overlap to what it asks now (`unit` is locked by the caller). Returns it."""
    if unit.status == unit.Status.OPEN:
        asked = asks_now(unit)
        if asked != unit.overlap:
            unit.overlap = asked
            unit.save(update_fields=["overlap"])
    return unit.overlap


def close_if_answered(unit):
    """Close an open unit once its answers reach what it asks now (under ask until decided, once
    they decide): the one closing rule, kept by a submit and by every decision asked again (a
    review, a changed setting). `unit` is locked, in the lock order, by the caller. Returns True if
    it closed."""
    ask_what_is_needed(unit)
    if unit.status != WorkUnit.Status.OPEN or unit.assignments.answered().count() < unit.overlap:
        return False
    unit.status = WorkUnit.Status.DONE
    unit.save(update_fields=["status"])
    return True
