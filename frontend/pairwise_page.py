"""The pairwise preference page (paper §4; CHIRP C.2.1 and Fig. 19; Prometheus-Vision rubrics)."""



from annotation.exceptions import AnnotationError
from annotation.models import CHIRP_CRITERIA, Side
from annotation.preferences.judgements import pairwise_task, submit_pairwise_judgement
from frontend.page_parts import gallery, gold_material

# --- pairwise preference (paper §4; CHIRP C.2.1 and Fig. 19; Prometheus-Vision rubrics) ----------

# CHIRP's survey questions word for word (Appendix C.2.1, as its workers saw them in Fig. 19);
# the two responses are "Assistant 1" and "Assistant 2" there and here. Overall is the forced choice.
CRITERION_QUESTIONS = {
    "overall": ("Overall Preference",
                "Which assistant's response do you prefer overall, considering all factors?"),
    "relevance_and_completeness": (
        "Relevance and Completeness Evaluation",
        "Which assistant's response is more relevant to the question and provides a more complete "
        "answer?"),
    "understanding_and_reasoning": (
        "Understanding and Reasoning",
        "Which assistant's answer displays a better understanding of concepts and better reasoning "
        "in its response?"),
    "hallucination": (
        "Hallucination Evaluation",
        "Which assistant accurately describes the image without adding or describing objects or "
        "elements that don't exist in the image?"),
    "detail": (
        "Detail Evaluation",
        "Which assistant's description of the image is more detailed, taking into consideration "
        "both the amount and quality of the details provided?"),
}
RUBRIC_SCORES = (1, 2, 3, 4, 5)


def _field_of(criterion):
    return "choice" if criterion == "overall" else f"criterion-{criterion}"


def _pairwise_questions(posted, *, criteria, rubric):
    posted = posted or {}
    questions = [
        {"name": _field_of(criterion), "title": CRITERION_QUESTIONS[criterion][0],
         "text": CRITERION_QUESTIONS[criterion][1], "value": posted.get(_field_of(criterion), "")}
        for criterion in ("overall", *criteria)
    ]
    scores = [
        {"name": f"score-{side}", "title": f"Score of Assistant {number}",
         "value": posted.get(f"score-{side}", "")}
        for number, side in enumerate(Side.values, start=1)
    ] if rubric else []
    return questions, scores


def pairwise_context(unit, posted, assignment=None):
    task = pairwise_task(assignment=assignment, unit=unit)
    battle = task["battle"]
    questions, scores = _pairwise_questions(posted, criteria=task["criteria"], rubric=task["rubric"])
    return {
        "instance": battle.instance,
        "gallery": gallery(battle.instance.ordered_images()),
        "left": task["left"].text,
        "right": task["right"].text,
        "questions": questions,
        "scores": scores,
        "rubric": task["rubric"],
        "score_values": RUBRIC_SCORES,
    }


def _read_pairwise(posted, *, criteria=True, rubric=True):
    choice = posted.get("choice", "")
    if choice not in Side.values:
        raise AnnotationError("Please choose the response you prefer overall (1 or 2).")
    chosen = {
        name: posted[_field_of(name)] for name in CHIRP_CRITERIA[1:]
        if criteria and posted.get(_field_of(name))
    }
    scores = {side: posted[f"score-{side}"] for side in Side.values
              if rubric and posted.get(f"score-{side}")}
    return choice, chosen, scores


def post_pairwise(*, request, assignment_id, worker, active_seconds):
    # The choices name the shown sides; the service maps them to A and B with the stored order.
    choice, criteria, scores = _read_pairwise(request.POST)
    judgement = submit_pairwise_judgement(
        assignment_id=assignment_id, worker=worker, choice=choice, criteria=criteria,
        rubric_scores=scores, active_seconds=active_seconds,
    )
    return f"judgement-{judgement.pk}"


def pairwise_gold_context(item, posted):
    material = gold_material(item["content"])
    criteria = CHIRP_CRITERIA[1:] if material.criteria else ()
    questions, scores = _pairwise_questions(posted, criteria=criteria, rubric=material.rubric)
    return {
        "instance": {"instruction": material.instruction},
        "gallery": material.gallery,
        "left": material.response_1,
        "right": material.response_2,
        "questions": questions,
        "scores": scores,
        "rubric": material.rubric,
        "score_values": RUBRIC_SCORES,
    }


def pairwise_gold_answer(posted, item):
    # Gold battles are answered "left" / "right": response_1 is always shown on the left.
    material = gold_material(item["content"])
    choice, criteria, scores = _read_pairwise(posted)
    for name in CHIRP_CRITERIA[1:] if material.criteria else ():
        if name not in criteria:
            raise AnnotationError(f"Please choose the left or the right response for "
                                  f"{name.replace('_', ' ')}.")
    if material.rubric and set(scores) != set(Side.values):
        raise AnnotationError("Please score both responses from 1 to 5.")
    return choice
