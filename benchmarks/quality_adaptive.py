"""Ask until decided against a fixed overlap: answers bought and aggregate accuracy (issue 26).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/quality_adaptive.py \
        [--references 300] [--battles 300] [--workers 30] [--spammers 0.2] [--seed 26]

Simulated workers with known accuracies answer through the real queue and services on PostgreSQL
(database `crowdbench_bench_adaptive` on the server of DATABASE_URL, made afresh): good workers
(each answers right with a probability drawn between 0.8 and 0.95) and spammers (a coin toss),
--spammers of them spammers. The truth is drawn per item: half the candidate references correct;
in each battle one response is the better one, on a random side.

Each setting gets its own family (verification) or tournament (battles) over a copy of the same
items, and the same workers: each worker's answer to an item is drawn from (seed, worker, item),
so a worker answers an item alike under every setting. The workers take turns in a seeded order;
each asks the queue for the next unit and answers it, until none has anything left. It prints,
per setting, the answers bought, per item, and the aggregate's accuracy against the truth: the
reference's verdict, and the side most judgements preferred (ties count half).

Verification: a fixed overlap of 3 decided by the majority, against ask until decided (2 agreeing
of up to 3). Battles: a fixed 5 judgements, against ask until decided on the Beta-Binomial
posterior at 0.9 and 0.95 (up to 5), and on the one-coin posterior (each judgement right 0.8 of
the time, Tournament.judgement_accuracy) at 0.9, up to 5 and up to 7. The goal: at least 30% fewer
answers for the same accuracy.
"""

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.support import analyse_as_autovacuum_would, fresh_database, set_up_django  # noqa: E402

DATABASE_NAME = "crowdbench_bench_adaptive"


def make_workers(count, spammer_share, seed):
    """(worker, accuracy) pairs: the first round(count × share) spammers, the rest good."""
    from annotation.models import Worker

    rng = random.Random(f"{seed}:workers")
    spammers = round(count * spammer_share)
    return [(Worker.objects.create(platform=Worker.Platform.LOCAL, external_id=f"bench-{n}"),
             0.5 if n < spammers else rng.uniform(0.8, 0.95))
            for n in range(count)]


def answers_right(seed, worker, item, accuracy):
    """Whether `worker` answers `item` right: the same under every setting."""
    return random.Random(f"{seed}:{worker.external_id}:{item}").random() < accuracy


def _image(n):
    from annotation.models import ImageAsset

    return ImageAsset.objects.create(url=f"https://upload.wikimedia.org/bench/adaptive-{n}.jpg",
                                     licence="CC0 1.0", author="Bench")


def verification_family(name, truths, **config):
    """A family with one candidate reference per truth (True: correct), its verification launched
    with `config`: {item number: reference}."""
    from django.utils import timezone

    from annotation.collection.captions import add_caption
    from annotation.collection.instructions import add_instance
    from annotation.collection.references import store_reference
    from annotation.models import InstructionFamily, Reference, Stage, StageConfig

    family = InstructionFamily.objects.create(name=name, target_instances=len(truths))
    StageConfig.objects.create(family=family, stage=Stage.VERIFICATION, launched_at=timezone.now(), **config)
    references = {}
    for item in range(len(truths)):
        instance = add_instance(family=family, instruction=f"How many sheep are there? ({item})",
                                images=[_image(f"{name}-{item}")])
        add_caption(instance=instance, texts=["Sheep on a green hill under a grey sky."])
        references[item] = store_reference(instance=instance, text=f"There are {item % 7 + 2} sheep.",
                                           source=Reference.Source.MANUAL)
    return family, references


def battle_tournament(name, count, **options):
    """A tournament of `count` battles, each between a better and a worse response to a verified
    instance (the better on a random side): (tournament, {battle id: better side})."""
    from annotation.collection.captions import add_caption
    from annotation.collection.instructions import add_instance
    from annotation.collection.references import store_reference
    from annotation.collection.verification import record_imported_verdict
    from annotation.models import InstructionFamily, ModelResponse, Reference, Tournament
    from annotation.preferences.tournaments import launch_tournament, sample_battles

    family = InstructionFamily.objects.create(name=name, target_instances=count)
    for item in range(count):
        instance = add_instance(family=family, instruction=f"What is the dog doing? ({item})",
                                images=[_image(f"{name}-{item}")])
        add_caption(instance=instance, texts=["A dog runs after a red ball on a beach."])
        reference = store_reference(instance=instance, text="It chases a ball.", source=Reference.Source.MANUAL)
        record_imported_verdict(reference=reference, reference_correct=True, problem_in_caption=False,
                                problem_in_response=False)
        ModelResponse.objects.create(instance=instance, model_name="better", text="It chases a red ball.")
        ModelResponse.objects.create(instance=instance, model_name="worse", text="It sleeps.")
    tournament = Tournament.objects.create(name=name, include_reference=False, seed=26, **options)
    tournament.families.set([family])
    sample_battles(tournament=tournament)
    launch_tournament(tournament=tournament)
    better = {battle.pk: "model_a" if battle.response_a.model_name == "better" else "model_b"
              for battle in tournament.battles.select_related("response_a")}
    return tournament, better


def drive(stage, workers, seed, answer):
    """Workers take turns, in a seeded order, leasing the next unit of `stage` and answering it
    (`answer(worker, accuracy, assignment)`), until no worker gets one. Returns the seconds taken."""
    from annotation.crowdwork.queue import next_assignment

    rng = random.Random(f"{seed}:turns")
    waiting = list(workers)
    started = time.perf_counter()
    while waiting:
        worker, accuracy = rng.choice(waiting)
        assignment = next_assignment(worker=worker, stage=stage)
        if assignment is None:
            waiting.remove((worker, accuracy))
            continue
        answer(worker, accuracy, assignment)
    return time.perf_counter() - started


def run_verification(name, truths, workers, seed, **config):
    from annotation.collection.verification import submit_verification
    from annotation.models import Reference, Stage, Verification

    family, references = verification_family(name, truths, **config)
    analyse_as_autovacuum_would()
    item_of = {reference.pk: item for item, reference in references.items()}

    def answer(worker, accuracy, assignment):
        item = item_of[assignment.unit.reference_id]
        says_correct = truths[item] == answers_right(seed, worker, f"reference-{item}", accuracy)
        submit_verification(assignment_id=assignment.pk, worker=worker, is_correct=says_correct,
                            problem_in_response=not says_correct)

    seconds = drive(Stage.VERIFICATION, workers, seed, answer)
    verdicts = dict(Reference.objects.filter(instance__family=family).values_list("pk", "verdict"))
    truth_of = {True: Reference.Verdict.CORRECT, False: Reference.Verdict.INCORRECT}
    right = sum(verdicts[references[item].pk] == truth_of[truth] for item, truth in enumerate(truths))
    undecided = sum(verdict == Reference.Verdict.PENDING for verdict in verdicts.values())
    bought = Verification.objects.filter(reference__instance__family=family).count()
    return bought, right / len(truths), undecided, seconds


def run_battles(name, count, workers, seed, **options):
    from annotation.models import HumanJudgement, Stage, WorkUnit
    from annotation.preferences.judgements import shown_left_for, submit_pairwise_judgement

    tournament, better = battle_tournament(name, count, **options)
    analyse_as_autovacuum_would()
    # The same battle in every tournament: its place in its tournament's order.
    item_of = {battle_id: item for item, battle_id in enumerate(sorted(better))}

    def answer(worker, accuracy, assignment):
        battle_id = assignment.unit.battle_id
        right = answers_right(seed, worker, f"battle-{item_of[battle_id]}", accuracy)
        preferred = better[battle_id] if right else ({"model_a", "model_b"} - {better[battle_id]}).pop()
        a_on_left = shown_left_for(assignment=assignment, tournament=tournament) == HumanJudgement.ShownLeft.A
        choice = "left" if (preferred == "model_a") == a_on_left else "right"
        submit_pairwise_judgement(assignment_id=assignment.pk, worker=worker, choice=choice)

    seconds = drive(Stage.PAIRWISE, workers, seed, answer)
    tallies = {battle_id: {"model_a": 0, "model_b": 0} for battle_id in better}
    judgements = HumanJudgement.objects.filter(battle__tournament=tournament)
    for judgement in judgements:
        tallies[judgement.battle_id][judgement.winner_side(judgement.choice)] += 1
    score = 0.0
    for battle_id, tally in tallies.items():
        other = ({"model_a", "model_b"} - {better[battle_id]}).pop()
        won, lost = tally[better[battle_id]], tally[other]
        score += 1.0 if won > lost else 0.5 if won == lost else 0.0
    open_battles = WorkUnit.objects.filter(battle__tournament=tournament, status=WorkUnit.Status.OPEN).count()
    return judgements.count(), score / count, open_battles, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--references", type=int, default=300)
    parser.add_argument("--battles", type=int, default=300)
    parser.add_argument("--workers", type=int, default=30)
    parser.add_argument("--spammers", type=float, default=0.2, help="share of the workers who toss a coin")
    parser.add_argument("--seed", type=int, default=26)
    arguments = parser.parse_args()
    server = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/")
    set_up_django(fresh_database(server, DATABASE_NAME))

    workers = make_workers(arguments.workers, arguments.spammers, arguments.seed)
    truth_rng = random.Random(f"{arguments.seed}:truth")
    truths = [truth_rng.random() < 0.5 for _ in range(arguments.references)]
    good = [accuracy for _, accuracy in workers if accuracy > 0.5]
    print(f"seed {arguments.seed}: {len(workers)} workers, {len(workers) - len(good)} spammers (accuracy 0.5), "
          f"{len(good)} good (mean accuracy {sum(good) / len(good):.3f}); {arguments.references} references "
          f"({sum(truths)} correct), {arguments.battles} battles", flush=True)
    settings = [
        ("verification", "fixed overlap 3, majority", lambda: run_verification(
            "fixed", truths, workers, arguments.seed, overlap=3, verification_rule="majority")),
        ("verification", "ask until decided, 2 agreeing of up to 3", lambda: run_verification(
            "adaptive", truths, workers, arguments.seed, overlap=3, adaptive=True, agree_to_decide=2)),
        ("battles", "fixed 5 judgements", lambda: run_battles(
            "fixed 5", arguments.battles, workers, arguments.seed, judgements_per_pair=5)),
        ("battles", "ask until decided, posterior 0.9, up to 5", lambda: run_battles(
            "adaptive 0.9", arguments.battles, workers, arguments.seed, judgements_per_pair=5, adaptive=True,
            posterior_threshold=0.9)),
        ("battles", "ask until decided, posterior 0.95, up to 5", lambda: run_battles(
            "adaptive 0.95", arguments.battles, workers, arguments.seed, judgements_per_pair=5, adaptive=True,
            posterior_threshold=0.95)),
        ("battles", "ask until decided, one-coin 0.8, posterior 0.9, up to 5", lambda: run_battles(
            "one-coin 0.9 up to 5", arguments.battles, workers, arguments.seed, judgements_per_pair=5,
            adaptive=True, posterior_threshold=0.9, judgement_accuracy=0.8)),
        ("battles", "ask until decided, one-coin 0.8, posterior 0.9, up to 7", lambda: run_battles(
            "one-coin 0.9 up to 7", arguments.battles, workers, arguments.seed, judgements_per_pair=7,
            adaptive=True, posterior_threshold=0.9, judgement_accuracy=0.8)),
    ]
    print()
    print("| stage | setting | answers bought | per item | fewer than fixed | accuracy | undecided | seconds |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    fixed = {}
    for stage, setting, run in settings:
        bought, accuracy, undecided, seconds = run()
        items = arguments.references if stage == "verification" else arguments.battles
        fixed.setdefault(stage, bought)
        fewer = f"{100 * (fixed[stage] - bought) / fixed[stage]:.1f}%" if bought != fixed[stage] else "-"
        print(f"| {stage} | {setting} | {bought:,} | {bought / items:.2f} | {fewer} | {accuracy:.3f} | "
              f"{undecided} | {seconds:.1f} |", flush=True)

if __name__ == "__main__":
    main()
