"""Replay a past campaign (issue 41): what each way of buying answers would have bought, and how
right it would have been, on answers already collected.

A researcher's last campaign (a family's counted verification answers, `campaign_answers`), or any
crowd's answers, such as a published crowd set, as a CSV with the header
`item,worker,answer` and optional `truth` and `order` columns (the common form of published crowd
data, e.g. the truth-inference benchmark sets). Each rule takes an item's answers in `order` (file
order where there is none) and stops where the project would stop: `annotation.crowdwork.stopping`'s
`answers_to_ask`, the function the queue asks, says after each answer whether the unit asks for
another. What the rule bought is then decided twice, by the votes (the most frequent answer; a tie
goes to the answer given first) and by a worker model, `annotation.worker_models.fit_labels`, the
fit the worker-model job runs, over every item's bought answers at once as the job fits a stage.
Each rule is scored against the truth where the file gives one, and against the worker model
fitted on every answer in the file, which is what a campaign that bought everything would decide.

Worker-aware rules (ask until decided weighed by each worker's accuracy, at several posterior
thresholds) need each worker's accuracy, which the stage takes from gold items where a worker has
enough, else from the worker model (annotation/workforce/accuracy.py). A file's gold is its truth:
an answer is weighed by its worker's accuracy on every *other* item of the file with a truth (the
item's own truth never weighs the answers that decide it), or on a share of them, shrunk toward a
prior as the stage shrinks it. A worker with too little of it, and every worker of a file without
truth, is weighed by Dawid-Skene fitted on all the file's answers, the item's own among them, which
flatters the rule somewhat; the output says which it used.

A file can only replay answers it holds: an item whose rule would ask for more than it has stops
there, and the rule's row counts such items as "ran out".
"""

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from annotation import worker_models
from annotation.crowdwork.stopping import Agreement, VoteRule, WorkerAware, answers_to_ask
from annotation.models import Aggregation
from annotation.replay_input import Answers, ReplayError
from annotation.workforce.accuracy import accuracy_from

FIXED_OVERLAPS = (1, 2, 3, 4, 5, 6, 7)
UNTIL_DECIDED = ((2, 3), (3, 5))
WORKER_AWARE = (0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)
# The kinds of rule, which also begin their rows' names: a fixed overlap, ask until agreed, and ask
# until decided weighed by one accuracy a worker, or by accuracy on each truth.
FIXED, AGREEING, WEIGHED, BY_TRUTH = "fixed overlap", "agreeing", "weighed", "by truth"
# The stage's defaults (StageConfig.prior_accuracy, model_min_answers) and most answers asked.
PRIOR_ACCURACY = 0.7
ENOUGH = 5
# Which items a share of the truth takes as gold, drawn alike in every replay of a file.
GOLD_SEED = 41
MOST = 5
# The largest overlap a replay takes: published crowd sets hold at most a few dozen answers an item,
# and a replay's time grows with the overlap asked (a million never ended).
LARGEST_OVERLAP = 1000


# --- rules ----------------------------------------------------------------------------------------


class Fixed(VoteRule):
    """A fixed overlap: a unit asks its overlap whatever the answers say."""

    labels = (None,)

    def decision(self, answers):
        return None


@dataclass(frozen=True)
class Rule:
    """A stopping rule as a stage sets it: `rule` (annotation.crowdwork.stopping's, or Fixed) up to `maximum`."""

    name: str
    rule: object
    maximum: int

    @property
    def kind(self):
        """FIXED, AGREEING, WEIGHED or BY_TRUTH, as the rule itself says."""
        if isinstance(self.rule, WorkerAware):
            return BY_TRUTH if self.rule.by_truth else WEIGHED
        return AGREEING if isinstance(self.rule, Agreement) else FIXED


def rules(*, fixed=FIXED_OVERLAPS, until_decided=UNTIL_DECIDED, worker_aware=WORKER_AWARE, by_truth=WORKER_AWARE,
          most=MOST, prior=PRIOR_ACCURACY):
    """The rules to replay: each fixed overlap, each (agree, most) of ask until decided, the
    verification stage's "agree to decide" and overlap, and each posterior threshold of ask until
    decided weighed by worker accuracy (`worker_aware`), and by accuracy on each truth from how
    common each label is (`by_truth`: the stage's "by verdict"), up to `most` (worker accuracy
    `prior` before evidence)."""
    found = [Rule(f"{FIXED} {overlap}", Fixed(), overlap) for overlap in fixed]
    for agree, most_asked in until_decided:
        if not 1 <= agree <= most_asked:
            raise ReplayError(f"Ask until decided needs 1 <= agree <= most answers; {agree} of up to {most_asked} "
                              "is not.")
        found.append(Rule(f"{agree} {AGREEING} of up to {most_asked}", Agreement(agree), most_asked))
    if (worker_aware or by_truth) and not 0.5 < prior < 1:
        raise ReplayError(f"A prior accuracy is between 0.5 and 1; {prior} is not.")
    for kind, thresholds in ((WEIGHED, worker_aware), (BY_TRUTH, by_truth)):
        for threshold in thresholds:
            if not 0.5 < threshold < 1:
                raise ReplayError(f"A posterior threshold is between 0.5 and 1; {threshold} is not.")
            found.append(Rule(_weighed_name(kind, threshold, most),
                              WorkerAware(threshold, prior, enough=ENOUGH, by_truth=kind == BY_TRUTH), most))
    return found


def _weighed_name(kind, threshold, most):
    # Also how a matched threshold's row is told from one of those asked for (`replay`).
    return f"{kind} {threshold:g}, up to {most}"


def gold_of(answers, gold_share):
    """The truth taken as gold: every item's, or `gold_share` of the items with a truth, drawn with
    GOLD_SEED, as a campaign mixes gold into its work."""
    gold = answers.truth
    if gold_share < 1:
        drawn = np.random.default_rng(GOLD_SEED).choice(len(gold), max(1, round(gold_share * len(gold))),
                                                         replace=False)
        gold = gold.iloc[np.sort(drawn)]
    return gold


def accuracies(answers, *, gold_share=1.0, fit=None):
    """Per answer (the frame's index), its worker's Accuracy as a worker-aware rule weighs it, with
    their accuracy on items of each truth, in the stage's order of evidence (`accuracy_from`): gold,
    here the truth of the file's other items (`gold_share` of the items with a truth, `gold_of`;
    none without truth or at a share of 0), where the worker has enough of it, else Dawid-Skene's
    over every answer (`fit`, fitted when not given), as the worker-model job's fit stands in at a
    stage. Returns (accuracies, what they rest on)."""
    frame = answers.frame
    fit = fit if fit is not None else worker_models.fit_labels(frame, Aggregation.DAWID_SKENE)
    shares = label_shares(fit)
    fitted = {worker: ((fit.reliability[worker], fit.answers[worker]), fit.by_truth.loc[worker].to_dict())
              for worker in fit.answers.index}
    fitted_on_every_answer = "Dawid-Skene fitted on every answer (the item's own among them)"
    if not (gold_share > 0 and len(answers.truth)):
        of_worker = {worker: accuracy_from(gold=(0, 0), fitted=accuracy, prior=PRIOR_ACCURACY, enough=ENOUGH,
                                           fitted_by_truth=by_truth, shares=shares)
                     for worker, (accuracy, by_truth) in fitted.items()}
        return frame["worker"].map(of_worker), fitted_on_every_answer
    gold = gold_of(answers, gold_share)
    truth = frame["task"].map(gold)

    def elsewhere(seen):
        # The worker's totals less this answer's own item: its truth never weighs its answers.
        return (seen.groupby(frame["worker"]).transform("sum") - seen).tolist()

    right = truth.notna() & (frame["label"] == truth)
    overall = zip(frame["worker"], elsewhere(right), elsewhere(truth.notna()), strict=True)
    by_truth = {label: list(zip(elsewhere(right & (truth == label)), elsewhere(truth == label), strict=True))
                for label in sorted(gold.unique())}
    values = [accuracy_from(gold=seen, fitted=fitted[worker][0], prior=PRIOR_ACCURACY, enough=ENOUGH,
                            gold_by_truth={label: counts[row] for label, counts in by_truth.items()},
                            fitted_by_truth=fitted[worker][1], shares=shares)
              for row, (worker, *seen) in enumerate(overall)]
    share = "" if gold_share >= 1 else f" ({len(gold):,} of them, {gold_share:.0%}, taken as gold)"
    return (pd.Series(values, index=frame.index, dtype=object),
            f"the truth of the worker's other items{share} where they have {ENOUGH} or more, else "
            + fitted_on_every_answer)


def label_shares(fit):
    """How common each label is before any answer, as a stage weighing by accuracy starts from it:
    the class priors of Dawid-Skene's `fit` on every answer (the worker-model job's, at a stage)."""
    return {label: float(share) for label, share in fit.shares.items()}


def _read_as(rule, labels, weights):
    """An item's answers as `rule` reads them: bare labels, or (label, accuracy) when weighed, each
    its worker's in `weights` (per answer; empty when no rule replayed is weighed)."""
    if isinstance(rule.rule, WorkerAware):
        return list(zip(labels, weights[labels.index], strict=True))
    return list(labels)


def bought(rule, labels):
    """How many of an item's `labels`, in order, `rule` buys, and whether it ran out (would have
    asked for more than the item has)."""
    count = 0
    while count < len(labels):
        if count >= answers_to_ask(rule.rule, labels[:count], rule.maximum):
            return count, False
        count += 1
    return count, answers_to_ask(rule.rule, labels, rule.maximum) > count


def buy(answers, rule, weights):
    """The rows of `answers.frame` that `rule` buys, and how many items ran out."""
    keep, ran_out = [], 0
    for _, labels in answers.frame.groupby("task", sort=False)["label"]:
        count, short = bought(rule, _read_as(rule, labels, weights))
        keep.extend(labels.index[:count])
        ran_out += short
    return answers.frame.loc[keep], ran_out


def votes(frame, rule=None, weights=None):
    """Each item's most frequent answer (a tie goes to the answer given first), or under a
    worker-aware `rule` its most probable one, each answer weighed by its worker's accuracy."""
    if rule is not None and isinstance(rule.rule, WorkerAware):
        return frame.groupby("task", sort=False)["label"].agg(
            lambda said: rule.rule.leading(_read_as(rule, said, weights)))
    return frame.groupby("task", sort=False)["label"].agg(lambda said: Counter(said).most_common(1)[0][0])


# --- the replay -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decided:
    """One aggregation's decisions of a rule's answers: `accuracy` against the truth (None without
    one) and `agreement` with the worker model fitted on every answer."""

    accuracy: float | None
    agreement: float


@dataclass(frozen=True)
class Row:
    rule: str
    answers: int
    items: int
    ran_out: int
    decided: dict
    kind: str = ""
    """The replayed Rule's kind; "" for every answer the file holds."""

    @property
    def per_item(self):
        return self.answers / self.items


@dataclass(frozen=True)
class Replay:
    answers: Answers
    model: str
    rows: list
    weighed_by: str = ""
    matched: tuple = ()
    """(kind, the name of its row replayed at the threshold that buys what fixed overlap `matching`
    buys, or None where even the lowest buys more), for each kind of weighed rule."""
    matching: int | None = None

    @property
    def workers(self):
        return self.answers.frame["worker"].nunique()


def replay(answers, *, model=Aggregation.DAWID_SKENE, chosen=None, gold_share=1.0, matching=None):
    """Replay `answers` under every rule of `chosen` (default `rules()`) and under "all answers";
    each decided by the votes and by `model`. Weighed rules take each worker's accuracy from the
    truth of their other items (`gold_share` of them), or from Dawid-Skene at a share of 0 (`accuracies`).
    With `matching`, a fixed overlap among those chosen, each kind of weighed rule is also replayed
    at the threshold that buys what that overlap buys (`threshold_buying`)."""
    if model == Aggregation.VOTES or model not in Aggregation.values:
        raise ReplayError(f"“{model}” is not a worker model; choose one of "
                          f"{', '.join(value for value in Aggregation.values if value != Aggregation.VOTES)}.")
    everything = answers.frame
    fitted = worker_models.fit_labels(everything, model)
    reference = fitted.labels
    rows = [_row_of("all answers", everything, 0, answers, model, reference)]
    chosen = rules() if chosen is None else chosen
    weights, weighed_by, shares = pd.Series(dtype=object), "", {}
    if any(isinstance(rule.rule, WorkerAware) for rule in chosen):
        dawid_skene = fitted if model == Aggregation.DAWID_SKENE else worker_models.fit_labels(
            everything, Aggregation.DAWID_SKENE)
        weights, weighed_by = accuracies(answers, gold_share=gold_share, fit=dawid_skene)
        shares = label_shares(dawid_skene)
    labels = tuple(sorted(everything["label"].unique()))
    # Its posterior spreads a wrong answer over the file's other labels, and starts from how common each is.
    chosen = [replace(rule, rule=_weighed(rule.rule, rule.rule.threshold, labels, shares))
              if isinstance(rule.rule, WorkerAware) else rule for rule in chosen]
    for rule in chosen:
        rows.append(_replayed(rule, answers, model, reference, weights))
    budget = next((row.answers for row in rows if row.rule == f"{FIXED} {matching}"), None)
    if matching is not None and budget is None:
        raise ReplayError(f"Matching fixed overlap {matching} needs it among the rules replayed.")
    matched = []
    for kind in dict.fromkeys(rule.kind for rule in chosen if isinstance(rule.rule, WorkerAware)) if budget else ():
        found = threshold_buying(budget, next(rule for rule in chosen if rule.kind == kind), answers, weights,
                                 labels=labels, shares=shares)
        if found is not None and found.name not in {row.rule for row in rows}:
            rows.append(_replayed(found, answers, model, reference, weights))
        matched.append((kind, found.name if found is not None else None))
    return Replay(answers=answers, model=str(model), rows=rows, weighed_by=weighed_by, matched=tuple(matched),
                  matching=matching)


def _weighed(rule, threshold, labels, shares):
    return WorkerAware(threshold, rule.prior, labels=labels, enough=rule.enough, by_truth=rule.by_truth,
                       shares=shares)


def threshold_buying(budget, rule, answers, weights, *, labels, shares):
    """`rule` (weighed) at the highest threshold, to 0.001, whose answers bought are at most
    `budget`, found by bisection (a higher threshold buys as many or more), or None when even the
    lowest buys more: what a researcher sets to spend what they spend now."""

    def at(thousandths):
        threshold = thousandths / 1000
        return Rule(_weighed_name(rule.kind, threshold, rule.maximum),
                    _weighed(rule.rule, threshold, labels, shares), rule.maximum)

    def affordable(thousandths):
        return len(buy(answers, at(thousandths), weights)[0]) <= budget

    low, high = 501, 999
    if not affordable(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if affordable(middle) else (low, middle - 1)
    return at(low)


def _replayed(rule, answers, model, reference, weights):
    frame, ran_out = buy(answers, rule, weights)
    return _row_of(rule.name, frame, ran_out, answers, model, reference, votes(frame, rule, weights), kind=rule.kind)


def _row_of(name, frame, ran_out, answers, model, reference, decided_by_votes=None, kind=""):
    decided = {Aggregation.VOTES.value: votes(frame) if decided_by_votes is None else decided_by_votes,
               str(model): worker_models.fit_labels(frame, model).labels}
    return Row(rule=name, answers=len(frame), items=frame["task"].nunique(), ran_out=ran_out,
               decided={key: _score(labels, answers.truth, reference) for key, labels in decided.items()}, kind=kind)


def _score(labels, truth, reference):
    known = truth.index.intersection(labels.index)
    accuracy = float((labels[known] == truth[known]).mean()) if len(known) else None
    return Decided(accuracy=accuracy, agreement=float((labels == reference.reindex(labels.index)).mean()))
