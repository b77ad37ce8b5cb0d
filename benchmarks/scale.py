"""A campaign-sized world on PostgreSQL, for the researcher-page and next-unit benchmarks.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ .venv/bin/python benchmarks/scale.py [--scale 1.0]

It creates (drops first) the database `crowdbench_bench_scale` and fills it, through the models
(bulk inserts, no service shortcuts that skip a row a service would write), with what a team that
runs VisIT-Bench for every new model has after a year: 50 families of 2,000 instances each
(100,000), each with its image, its caption (a caption unit and its assignment), its generated
reference and three verifications (a unit and three assignments), most verified and some at every
other stage; 10,000 workers, a quarter on each platform; 20 tournaments of 15 models with 12,500
battles each, four human judgements per battle (1,000,000, each with its unit's assignment) and two
judge runs of two orderings each (1,000,000 judge judgements); and 10 snapshots built by the real
snapshot job. `--scale 0.02` makes a world fifty times smaller, for a quick look. It prints how long
each part took.
"""

import argparse
import os
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.support import analyse_as_autovacuum_would, fresh_database, set_up_django  # noqa: E402

DATABASE_NAME = "crowdbench_bench_scale"
FAMILIES, INSTANCES_PER_FAMILY, WORKERS = 50, 2000, 10_000
TOURNAMENTS, MODELS, BATTLES_PER_TOURNAMENT, JUDGEMENTS_PER_BATTLE = 20, 15, 12_500, 4
JUDGE_RUNS, SNAPSHOTS, VERIFIERS = 2, 10, 3
BATCH = 10_000


class Timer:
    def __init__(self):
        self.started = time.perf_counter()
        self.parts = []

    def part(self, name, started):
        self.parts.append((name, time.perf_counter() - started))
        print(f"  {name}: {self.parts[-1][1]:.1f} s", flush=True)


def _bulk(model, rows):
    return model.objects.bulk_create(rows, batch_size=BATCH)


def seed_workers(count):
    from annotation.models import Worker

    platforms = [Worker.Platform.MTURK, Worker.Platform.CLOUDRESEARCH, Worker.Platform.PROLIFIC,
                 Worker.Platform.LOCAL]
    return _bulk(Worker, [Worker(platform=platforms[n % 4], external_id=f"W{n:08d}") for n in range(count)])


def seed_collection(*, families, per_family, workers, rng):
    """Families, instances with an image, a caption, a reference and their verifications, with the
    work units and assignments the crowd stages leave behind."""
    from django.utils import timezone

    from annotation.models import (
        Assignment,
        Caption,
        ImageAsset,
        Instance,
        InstanceImage,
        InstructionFamily,
        Reference,
        Stage,
        StageConfig,
        Verification,
        WorkState,
        WorkUnit,
    )

    now = timezone.now()
    made_families = _bulk(InstructionFamily, [
        InstructionFamily(name=f"Family {n:02d}", description="Benchmark family.", target_instances=per_family,
                          seed_instruction="What is unusual here?", seed_response="The cat is on the table.")
        for n in range(families)])
    _bulk(StageConfig, [StageConfig(family=family, stage=stage, overlap=VERIFIERS if stage == Stage.VERIFICATION else 1,
                                    launched_at=now)
                        for family in made_families for stage in (Stage.CAPTION, Stage.VERIFICATION)])
    statuses = ([Instance.Status.VERIFIED] * 90 + [Instance.Status.AWAITING_VERIFICATION] * 4
                + [Instance.Status.AWAITING_CAPTION] * 3 + [Instance.Status.DISCARDED] * 3)
    instances = _bulk(Instance, [
        Instance(family=family, instruction=f"Instruction {n} of {family.name}: what does the picture show?",
                 status=rng.choice(statuses), reference_output="")
        for family in made_families for n in range(per_family)])
    images = _bulk(ImageAsset, [ImageAsset(url=f"https://upload.wikimedia.org/bench/{instance.pk}.jpg",
                                           licence="CC0 1.0", author="Bench") for instance in instances])
    _bulk(InstanceImage, [InstanceImage(instance=instance, image=image, position=0)
                          for instance, image in zip(instances, images, strict=True)])
    captioned = [i for i in instances if i.status != Instance.Status.AWAITING_CAPTION]
    units = _bulk(WorkUnit, [WorkUnit(stage=Stage.CAPTION, key=f"instance-{i.pk}-round-1", family_id=i.family_id,
                                      instance=i, status=WorkUnit.Status.DONE) for i in captioned])
    leases = _bulk(Assignment, [
        Assignment(unit=unit, worker=rng.choice(workers), status=Assignment.Status.SUBMITTED, leased_at=now,
                   lease_expires_at=now, submitted_at=now, active_seconds=rng.uniform(60, 400),
                   work_state=rng.choice([WorkState.PROVISIONAL, WorkState.ACCEPTED]))
        for unit in units])
    captions = _bulk(Caption, [
        Caption(instance=unit.instance, texts=[f"A photograph for instance {unit.instance_id}, described in detail."],
                author_id=lease.worker_id, assignment=lease, round=1)
        for unit, lease in zip(units, leases, strict=True)])
    caption_of = {caption.instance_id: caption for caption in captions}
    verdicts = {Instance.Status.VERIFIED: Reference.Verdict.CORRECT,
                Instance.Status.DISCARDED: Reference.Verdict.INCORRECT,
                Instance.Status.AWAITING_VERIFICATION: Reference.Verdict.PENDING}
    references = _bulk(Reference, [
        Reference(instance=i, caption=caption_of[i.pk], text=f"The answer for instance {i.pk}.", model="gpt-4",
                  prompt_sha256=f"{i.pk:064d}", verdict=verdicts[i.status], prompt_tokens=180,
                  completion_tokens=60, cost_usd="0.009")
        for i in captioned])
    Instance.objects.filter(status=Instance.Status.VERIFIED).update(reference_output="The verified answer.")
    for chunk_start in range(0, len(captioned), BATCH):
        chunk = captioned[chunk_start:chunk_start + BATCH]
        for instance in chunk:
            instance.current_caption = caption_of[instance.pk]
        Instance.objects.bulk_update(chunk, ["current_caption"])
    verification_units = _bulk(WorkUnit, [
        WorkUnit(stage=Stage.VERIFICATION, key=f"reference-{ref.pk}", family_id=ref.instance.family_id,
                 instance_id=ref.instance_id, reference=ref, overlap=VERIFIERS,
                 status=WorkUnit.Status.OPEN if ref.verdict == Reference.Verdict.PENDING else WorkUnit.Status.DONE)
        for ref in references])
    votes, vote_leases = [], []
    for unit, reference in zip(verification_units, references, strict=True):
        count = 1 if reference.verdict == Reference.Verdict.PENDING else VERIFIERS
        for worker in rng.sample(workers, count):
            vote_leases.append(Assignment(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED, leased_at=now,
                                          lease_expires_at=now, submitted_at=now,
                                          active_seconds=rng.uniform(20, 120)))
            votes.append((reference, worker))
    vote_leases = _bulk(Assignment, vote_leases)
    _bulk(Verification, [
        Verification(reference=reference, worker=worker, assignment=lease,
                     is_correct=reference.verdict != Reference.Verdict.INCORRECT,
                     problem_in_response=reference.verdict == Reference.Verdict.INCORRECT)
        for (reference, worker), lease in zip(votes, vote_leases, strict=True)])
    return made_families


def seed_tournaments(*, families, workers, rng, tournaments, battles_per_tournament):
    from django.utils import timezone

    from annotation.models import (
        Assignment,
        Battle,
        HumanJudgement,
        Instance,
        JudgeJudgement,
        JudgeRun,
        ModelResponse,
        Stage,
        StageConfig,
        Tournament,
        WorkUnit,
    )

    now = timezone.now()
    models = [f"model-{n:02d}" for n in range(MODELS)]
    strength = {name: rng.gauss(0, 1) for name in models}
    StageConfig.objects.bulk_create([StageConfig(family=family, stage=Stage.PAIRWISE, overlap=JUDGEMENTS_PER_BATTLE,
                                                 launched_at=now) for family in families], batch_size=BATCH)
    verified = list(Instance.objects.filter(status=Instance.Status.VERIFIED).values_list("pk", "family_id"))
    per_tournament = max(1, len(families) // tournaments)
    responses = {}
    for number in range(tournaments):
        tournament = Tournament.objects.create(name=f"Tournament {number:02d}", include_reference=False,
                                               judgements_per_pair=JUDGEMENTS_PER_BATTLE, launched_at=now, seed=number)
        chosen = families[number * per_tournament:(number + 1) * per_tournament] or families[:1]
        tournament.families.set(chosen)
        family_ids = {family.pk for family in chosen}
        pool = [pk for pk, family_id in verified if family_id in family_ids]
        pairs = set()
        while len(pairs) < min(battles_per_tournament, len(pool) * MODELS * (MODELS - 1) // 2):
            a, b = rng.sample(models, 2)
            pairs.add((rng.choice(pool), a, b))
        missing = [(instance, name) for instance, a, b in pairs for name in (a, b) if (instance, name) not in responses]
        made = _bulk(ModelResponse, [ModelResponse(instance_id=instance, model_name=name,
                                                   text=f"{name} answers instance {instance}.")
                                     for instance, name in dict.fromkeys(missing)])
        responses.update({(response.instance_id, response.model_name): response for response in made})
        family_of = dict(verified)
        battles = _bulk(Battle, [Battle(tournament=tournament, instance_id=instance,
                                        response_a=responses[instance, a], response_b=responses[instance, b])
                                 for instance, a, b in sorted(pairs)])
        units = _bulk(WorkUnit, [WorkUnit(stage=Stage.PAIRWISE, key=f"battle-{battle.pk}",
                                          family_id=family_of[battle.instance_id], instance_id=battle.instance_id,
                                          battle=battle, overlap=JUDGEMENTS_PER_BATTLE, status=WorkUnit.Status.DONE)
                                 for battle in battles])
        leases, choices = [], []
        for unit, battle in zip(units, battles, strict=True):
            for worker in rng.sample(workers, JUDGEMENTS_PER_BATTLE):
                leases.append(Assignment(unit=unit, worker=worker, status=Assignment.Status.SUBMITTED, leased_at=now,
                                         lease_expires_at=now, submitted_at=now, active_seconds=rng.uniform(15, 90)))
                a_wins = rng.random() < 1 / (1 + 2.718 ** (strength[battle.response_b.model_name]
                                                         - strength[battle.response_a.model_name]))
                shown_left = rng.choice("ab")
                choices.append((battle, worker, shown_left, "left" if a_wins == (shown_left == "a") else "right"))
        leases = _bulk(Assignment, leases)
        _bulk(HumanJudgement, [HumanJudgement(battle=battle, tournament=tournament, worker=worker, assignment=lease,
                                              shown_left=shown_left,
                                              choice=choice)
                               for (battle, worker, shown_left, choice), lease in zip(choices, leases, strict=True)])
        for run_number in range(JUDGE_RUNS):
            run = JudgeRun.objects.create(tournament=tournament, engine=f"judge-{run_number}",
                                          mode=JudgeRun.Mode.REFERENCE_FREE, status=JudgeRun.Status.DONE,
                                          total_calls=2 * len(battles), done_calls=2 * len(battles),
                                          started_at=now - timedelta(hours=1), finished_at=now)
            _bulk(JudgeJudgement, [JudgeJudgement(run=run, battle=battle, ordering=ordering, criterion="overall",
                                        cot="Response A is more complete. Overall, Response A is better.",
                                        winner=rng.choice("ab"))
                              for battle in battles for ordering in ("ab", "ba")])
        print(f"    {tournament.name}: {len(battles)} battles, {len(leases)} human judgements", flush=True)


def build_snapshots(count):
    from annotation.datasets import snapshots
    from annotation.models import Tournament

    tournaments = list(Tournament.objects.order_by("pk"))
    for number in range(count):
        chosen = tournaments[2 * number:2 * number + 2] or tournaments[:1]
        snapshots.build_snapshot(snapshot=snapshots.request_snapshot(tournaments=chosen, background=False,
                                                                     note=f"Benchmark snapshot {number + 1}"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full world (e.g. 0.02)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--snapshots", type=int, default=SNAPSHOTS,
                        help=f"snapshots built by the real job at full scale (default {SNAPSHOTS}; each takes minutes)")
    parser.add_argument("--database", default=DATABASE_NAME, help="the database to (re)create and fill")
    parser.add_argument("--server", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
                        help="a PostgreSQL URL; only its server is used")
    args = parser.parse_args()
    if not 0 < args.scale <= 1:
        parser.error("--scale is a fraction above 0, at most 1")
    rng = random.Random(args.seed)
    timer = Timer()
    started = time.perf_counter()
    set_up_django(fresh_database(args.server, args.database))
    timer.part("migrate", started)

    scaled = lambda n: max(1, round(n * args.scale))  # noqa: E731 - a local shorthand
    started = time.perf_counter()
    workers = seed_workers(scaled(WORKERS))
    timer.part(f"{len(workers):,} workers", started)
    started = time.perf_counter()
    families = seed_collection(families=max(2, scaled(FAMILIES)), per_family=INSTANCES_PER_FAMILY if args.scale == 1
                               else scaled(INSTANCES_PER_FAMILY), workers=workers, rng=rng)
    timer.part(f"{len(families)} families and their instances, captions, references, verifications", started)
    started = time.perf_counter()
    seed_tournaments(families=families, workers=workers, rng=rng, tournaments=max(1, scaled(TOURNAMENTS)),
                     battles_per_tournament=scaled(BATTLES_PER_TOURNAMENT))
    timer.part("tournaments, battles, human and judge judgements", started)
    started = time.perf_counter()
    analyse_as_autovacuum_would()
    timer.part("ANALYZE", started)
    started = time.perf_counter()
    build_snapshots(max(1, scaled(args.snapshots)))
    timer.part("snapshots (the real job)", started)
    from annotation.models import Assignment, HumanJudgement, Instance, JudgeJudgement, Worker, WorkUnit

    counts = {model.__name__: model.objects.count()
              for model in (Instance, Worker, WorkUnit, Assignment, HumanJudgement, JudgeJudgement)}
    print("rows: " + ", ".join(f"{name} {count:,}" for name, count in counts.items()))
    print(f"seeded in {time.perf_counter() - timer.started:.0f} s on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
