"""Model responses and pairwise preference studies (paper §4; CHIRP Appendix C.2).

Researchers import each model's predictions (the VisIT-Bench `predictions.csv`), sample battles
of two responses to one instance, and send them through the crowd work queue, where several
workers each make a forced choice. The side a response is shown on is drawn per assignment.
"""

import ast
import csv
import io
import itertools
import json
import random
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotation.exceptions import AnnotationError
from annotation.imports import MAX_REPORTED_ERRORS, _read
from annotation.models import (
    CHIRP_CRITERIA,
    REFERENCE_MODEL_NAME,
    Battle,
    HumanJudgement,
    Instance,
    ModelResponse,
    PreferenceStudy,
    Side,
    Stage,
    StageConfig,
    WorkUnit,
)
from annotation.queue import lock_assignment_for_submission, mark_submitted

PREDICTION_SUFFIX = " prediction"
RUBRIC_SCORES = range(1, 6)


# --- predictions.csv ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PredictionsImportResult:
    imported_from: str
    created: int
    unchanged: int
    models: tuple[str, ...]

    def summary(self):
        return (
            f"{self.created} prediction(s) imported, {self.unchanged} already there, "
            f"from {len(self.models)} model(s): {', '.join(self.models)}."
        )


def import_predictions(*, path_or_file):
    """Import a predictions.csv: a row per instance, a `<model name> prediction` column per model.

    Rows are matched to instances by instruction and image URL(s) (and instruction_category when
    that alone is ambiguous). Every row is checked first; any problem is reported by row (and
    column) and nothing is imported. Importing the same file twice changes nothing.
    """
    imported_from, text = _read(path_or_file)
    reader = csv.reader(io.StringIO(text, newline=""))
    header = [name.strip() for name in next(reader, None) or []]
    if not header:
        raise AnnotationError(f"{imported_from} is empty: predictions.csv needs a header row.")
    image_column = "images" if "images" in header else "image"
    missing = [c for c in ("instruction", "instruction_category", image_column) if c not in header]
    model_columns = [
        c for c in header if c.endswith(PREDICTION_SUFFIX) and c != PREDICTION_SUFFIX.strip()
    ]
    if missing:
        raise AnnotationError(
            f"{imported_from}, row 1 (header): missing column(s) "
            + ", ".join(f"“{c}”" for c in missing)
            + "."
        )
    if not model_columns:
        raise AnnotationError(
            f"{imported_from}, row 1 (header): no “<model name> prediction” column."
        )
    models = {column: column[: -len(PREDICTION_SUFFIX)].strip() for column in model_columns}
    if REFERENCE_MODEL_NAME in models.values():
        raise AnnotationError(
            f"{imported_from}, row 1 (header): “{REFERENCE_MODEL_NAME}” is the "
            "verified reference's name; please rename that model."
        )

    index = _instances_by_instruction_and_images()
    errors = []
    matched_rows = {}
    planned = []
    for number, cells in enumerate(reader, start=2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            errors.append(
                f"row {number}: {len(cells)} cells, but the header has {len(header)} columns"
            )
            continue
        row = dict(zip(header, cells, strict=True))
        instance = _match(row, image_column, index, number, errors)
        if instance is None:
            continue
        if instance.pk in matched_rows:
            errors.append(
                f"row {number}: the same instance as row {matched_rows[instance.pk]} "
                f"(instance #{instance.pk}); each instance takes one row"
            )
            continue
        matched_rows[instance.pk] = number
        for column, model_name in models.items():
            prediction = row[column].strip()
            if not prediction:
                errors.append(f'row {number}, column "{column}": is empty')
                continue
            planned.append((number, column, instance, model_name, prediction))

    existing = {
        (response.instance_id, response.model_name): response.text
        for response in ModelResponse.objects.filter(
            instance_id__in=matched_rows, model_name__in=models.values()
        )
    }
    to_create = []
    unchanged = 0
    for number, column, instance, model_name, prediction in planned:
        before = existing.get((instance.pk, model_name))
        if before is None:
            to_create.append(
                ModelResponse(
                    instance=instance,
                    model_name=model_name,
                    text=prediction,
                    imported_from=imported_from,
                )
            )
        elif before == prediction:
            unchanged += 1
        else:
            errors.append(
                f'row {number}, column "{column}": instance #{instance.pk} already has a '
                f"different prediction from {model_name}; delete it first to replace it"
            )
    if not matched_rows and not errors:
        raise AnnotationError(f"{imported_from} has a header but no rows.")
    if errors:
        lines = [f"{imported_from}: {len(errors)} problem(s) found; nothing was imported."]
        lines += errors[:MAX_REPORTED_ERRORS]
        if len(errors) > MAX_REPORTED_ERRORS:
            lines.append(f"… and {len(errors) - MAX_REPORTED_ERRORS} more.")
        raise AnnotationError("\n".join(lines))
    with transaction.atomic():
        ModelResponse.objects.bulk_create(to_create)
    return PredictionsImportResult(
        imported_from=imported_from,
        created=len(to_create),
        unchanged=unchanged,
        models=tuple(sorted(models.values())),
    )


def _instances_by_instruction_and_images():
    index = {}
    instances = Instance.objects.select_related("family").prefetch_related(
        "instanceimage_set__image"
    )
    for instance in instances:
        urls = tuple(link.image.url for link in instance.instanceimage_set.all())
        index.setdefault((instance.instruction.strip(), urls), []).append(instance)
    return index


def _image_urls(value):
    value = value.strip()
    if not value.startswith("["):
        return (value,)
    try:
        parsed = json.loads(value)
    except ValueError:
        # Sheets written from pandas hold Python list literals ('...') rather than JSON.
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return None
    if not isinstance(parsed, list) or not all(isinstance(url, str) for url in parsed):
        return None
    return tuple(url.strip() for url in parsed)


def _match(row, image_column, index, number, errors):
    urls = _image_urls(row[image_column])
    if not urls or not all(urls):
        errors.append(f'row {number}, column "{image_column}": not an image URL or a list of them')
        return None
    candidates = index.get((row["instruction"].strip(), urls), [])
    if len(candidates) > 1:
        candidates = [i for i in candidates if i.family.name == row["instruction_category"].strip()]
    if not candidates:
        errors.append(f"row {number}: no instance has this instruction and image(s)")
        return None
    if len(candidates) > 1:
        errors.append(
            f"row {number}: matches instances "
            + ", ".join(f"#{i.pk}" for i in candidates)
            + "; cannot tell which"
        )
        return None
    return candidates[0]


# --- studies and battles -----------------------------------------------------------------------


def create_study(*, name, families=(), sample=True, **options):
    """A preference study and (unless sample=False) its battles, in one transaction."""
    if PreferenceStudy.objects.filter(name=name).exists():
        raise AnnotationError(f"A preference study named “{name}” already exists.")
    with transaction.atomic():
        study = PreferenceStudy.objects.create(name=name, **options)
        if families:
            study.families.set(families)
        if sample:
            sample_battles(study=study)
    return study


def _eligible_instances(study):
    instances = Instance.objects.filter(status=Instance.Status.VERIFIED).select_related("family")
    family_ids = list(study.families.values_list("pk", flat=True))
    if family_ids:
        instances = instances.filter(family_id__in=family_ids)
    instances = instances.prefetch_related("instanceimage_set").order_by("pk")
    if study.image_kind == PreferenceStudy.ImageKind.ALL:
        return list(instances)
    want_multi = study.image_kind == PreferenceStudy.ImageKind.MULTI
    return [
        i
        for i in instances
        if (i.family.is_multi_image or len(i.instanceimage_set.all()) > 1) == want_multi
    ]


def reference_responses(*, instances):
    """The verified reference of each instance as a ModelResponse (created once, then reused)."""
    existing = set(
        ModelResponse.objects.filter(
            instance__in=instances, model_name=REFERENCE_MODEL_NAME
        ).values_list("instance_id", flat=True)
    )
    ModelResponse.objects.bulk_create(
        [
            ModelResponse(
                instance=i,
                model_name=REFERENCE_MODEL_NAME,
                text=i.reference_output,
                imported_from="verified reference",
            )
            for i in instances
            if i.pk not in existing and i.reference_output.strip()
        ],
        ignore_conflicts=True,
    )


def sample_battles(*, study):
    """Sample the study's battles, the same ones for the same seed; returns how many were made.

    Pairs are drawn as unordered pairs of responses to one instance; which one is A is drawn too,
    so no model is always shown as A to the judges.
    """
    if study.battles.exists():
        raise AnnotationError(f"“{study.name}” already has its battles.")
    if study.launched_at:
        raise AnnotationError(f"“{study.name}” is launched; its battles can no longer change.")
    instances = _eligible_instances(study)
    if study.include_reference:
        reference_responses(instances=instances)
    responses = ModelResponse.objects.filter(instance__in=instances).order_by(
        "instance_id", "model_name"
    )
    if study.model_names:
        wanted = set(study.model_names) | (
            {REFERENCE_MODEL_NAME} if study.include_reference else set()
        )
        responses = responses.filter(model_name__in=wanted)
    elif not study.include_reference:
        responses = responses.exclude(model_name=REFERENCE_MODEL_NAME)
    by_instance = {}
    for response in responses:
        by_instance.setdefault(response.instance_id, []).append(response)

    rng = random.Random(study.seed)
    pairs_by_instance = [
        list(itertools.combinations(by_instance[i.pk], 2))
        for i in instances
        if len(by_instance.get(i.pk, ())) >= 2
    ]
    Sampling = PreferenceStudy.Sampling
    if study.sampling == Sampling.ALL_PAIRS:
        chosen = [pair for pairs in pairs_by_instance for pair in pairs]
    elif study.sampling == Sampling.K_MATCHUPS:
        if study.matchups_per_question < 1:
            raise AnnotationError("k matchups per question must be at least 1.")
        chosen = [
            pair
            for pairs in pairs_by_instance
            for pair in rng.sample(pairs, min(study.matchups_per_question, len(pairs)))
        ]
    else:
        if study.battle_count < 1:
            raise AnnotationError("Uniform sampling needs a number of battles of at least 1.")
        pool = [pair for pairs in pairs_by_instance for pair in pairs]
        chosen = sorted(
            rng.sample(pool, min(study.battle_count, len(pool))),
            key=lambda pair: (pair[0].instance_id, pair[0].model_name, pair[1].model_name),
        )
    if not chosen:
        raise AnnotationError(
            f"“{study.name}” has nothing to compare: no verified instance with two or more "
            "responses matches its families, image kind and models. Import predictions first."
        )
    battles = []
    for first, second in chosen:
        a, b = (second, first) if rng.random() < 0.5 else (first, second)
        battles.append(Battle(study=study, instance_id=a.instance_id, response_a=a, response_b=b))
    Battle.objects.bulk_create(battles)
    return len(battles)


def launch_study(*, study):
    """Put every battle of the study in the work queue, `judgements_per_pair` workers each."""
    if not study.battles.exists():
        raise AnnotationError(f"“{study.name}” has no battles to launch; sample them first.")
    now = timezone.now()
    with transaction.atomic():
        battles = list(study.battles.select_related("instance"))
        # The queue offers a stage's units of a family only while that family's stage is launched.
        for family_id in {battle.instance.family_id for battle in battles}:
            config, _ = StageConfig.objects.get_or_create(
                family_id=family_id,
                stage=Stage.PAIRWISE,
                defaults={
                    "overlap": study.judgements_per_pair,
                    "lease_minutes": study.lease_minutes,
                },
            )
            if config.launched_at is None:
                config.launched_at = now
                config.save(update_fields=["launched_at"])
        WorkUnit.objects.bulk_create(
            [
                WorkUnit(
                    stage=Stage.PAIRWISE,
                    key=battle.unit_key,
                    family_id=battle.instance.family_id,
                    instance=battle.instance,
                    overlap=study.judgements_per_pair,
                )
                for battle in battles
            ],
            ignore_conflicts=True,
        )
        if study.launched_at is None:
            study.launched_at = now
            study.save(update_fields=["launched_at"])
    return study


# --- the crowd's judgements ----------------------------------------------------------------------


def battle_of(unit):
    return Battle.objects.select_related("study", "instance", "response_a", "response_b").get(
        pk=int(unit.key.removeprefix("battle-"))
    )


def shown_left_for(*, assignment, study):
    """Which response this assignment shows on the left, drawn once per assignment.

    Drawn from the study seed and the assignment, so a reload shows the same sides and the
    worker's choice is read against what they saw, never against what the browser claims.
    """
    rng = random.Random(f"{study.seed}:{assignment.pk}")
    return HumanJudgement.ShownLeft.A if rng.random() < 0.5 else HumanJudgement.ShownLeft.B


def pairwise_task(*, assignment=None, unit=None):
    """What the worker sees: the battle, and its responses on their shown sides.

    Without an assignment (an MTurk preview, where nothing is leased) A is shown on the left.
    """
    battle = battle_of(assignment.unit if assignment is not None else unit)
    shown_left = (
        shown_left_for(assignment=assignment, study=battle.study)
        if assignment is not None
        else HumanJudgement.ShownLeft.A
    )
    left, right = (
        (battle.response_a, battle.response_b)
        if shown_left == HumanJudgement.ShownLeft.A
        else (battle.response_b, battle.response_a)
    )
    return {
        "battle": battle,
        "shown_left": shown_left,
        "left": left,
        "right": right,
        "criteria": CHIRP_CRITERIA[1:] if battle.study.with_criteria else (),
        "rubric": battle.study.rubric_for(battle.instance) if battle.study.with_rubric else "",
    }


def _check_side(value, what):
    if value not in Side.values:
        raise AnnotationError(f"Please choose the left or the right response for {what}.")
    return value


def _clean_criteria(study, criteria):
    criteria = dict(criteria or {})
    if not study.with_criteria:
        if criteria:
            raise AnnotationError("This study asks only for an overall preference.")
        return {}
    unknown = set(criteria) - set(CHIRP_CRITERIA[1:])
    if unknown:
        raise AnnotationError(f"Unknown criteria: {', '.join(sorted(unknown))}.")
    return {
        name: _check_side(criteria.get(name), name.replace("_", " ")) for name in CHIRP_CRITERIA[1:]
    }


def _clean_rubric_scores(study, scores):
    scores = dict(scores or {})
    if not study.with_rubric:
        if scores:
            raise AnnotationError("This study does not ask for rubric scores.")
        return {}
    cleaned = {}
    for side in Side.values:
        try:
            score = int(scores.get(side))
        except (TypeError, ValueError):
            score = None
        if score not in RUBRIC_SCORES:
            raise AnnotationError(f"Please score the {side} response from 1 to 5.")
        cleaned[side] = score
    return cleaned


def submit_pairwise_judgement(
    *, assignment_id, worker, choice, criteria=None, rubric_scores=None, active_seconds=None
):
    """A worker's forced choice on a battle (and CHIRP criteria, rubric scores if the study asks).

    Submitting the same assignment again returns the judgement already stored.
    """
    _check_side(choice, "your overall preference")
    with transaction.atomic():
        assignment, already = lock_assignment_for_submission(
            assignment_id=assignment_id, worker=worker, stage=Stage.PAIRWISE
        )
        if already:
            return assignment.human_judgement
        battle = battle_of(assignment.unit)
        study = battle.study
        judgement = HumanJudgement.objects.create(
            battle=battle,
            worker=worker,
            assignment=assignment,
            shown_left=shown_left_for(assignment=assignment, study=study),
            choice=choice,
            criteria=_clean_criteria(study, criteria),
            rubric_scores=_clean_rubric_scores(study, rubric_scores),
            active_seconds=active_seconds,
        )
        mark_submitted(assignment, active_seconds=active_seconds)
    return judgement
