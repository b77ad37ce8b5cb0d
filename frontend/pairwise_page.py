"""The pairwise preference page (paper §4; CHIRP C.2.1 and Fig. 19; Prometheus-Vision rubrics)."""



from django import forms

from annotation.models import CHIRP_CRITERIA, Side
from annotation.preferences.judgements import pairwise_task, submit_pairwise_judgement
from frontend.answer_forms import AnswerForm
from frontend.page_parts import TaskMaterial, gallery

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
_CHOICE_NEEDED = "Please choose the response you prefer overall (1 or 2)."
_SCORES_NEEDED = "Please score both responses from 1 to 5."


def _field_of(criterion):
    return "choice" if criterion == "overall" else f"criterion-{criterion}"


def _asked_criteria(material):
    return CHIRP_CRITERIA[1:] if material is not None and material.criteria else ()


class PairwiseForm(AnswerForm):
    """A verdict on a battle, naming the shown sides: the overall choice, and CHIRP's criteria and
    the rubric's scores. Those the page asked for are required where the form is told what it showed
    (a gold item); a unit's answer is held against its tournament's settings by the service."""

    choice = forms.ChoiceField(choices=Side.choices,
                               error_messages={"required": _CHOICE_NEEDED, "invalid_choice": _CHOICE_NEEDED})

    def __init__(self, data=None, files=None, **kwargs):
        super().__init__(data, files, **kwargs)
        asked = _asked_criteria(self.shown_material)
        for criterion in CHIRP_CRITERIA[1:]:
            needed = f"Please choose the left or the right response for {criterion.replace('_', ' ')}."
            self.fields[_field_of(criterion)] = forms.ChoiceField(
                choices=Side.choices, required=criterion in asked,
                error_messages={"required": needed, "invalid_choice": needed})
        scored = bool(self.shown_material is not None and self.shown_material.rubric)
        for side in Side.values:
            self.fields[f"score-{side}"] = forms.ChoiceField(
                choices=[(str(score), str(score)) for score in RUBRIC_SCORES], required=scored,
                error_messages={"required": _SCORES_NEEDED, "invalid_choice": _SCORES_NEEDED})

    def clean(self):
        answer = super().clean()
        answer["criteria"] = {criterion: answer[_field_of(criterion)] for criterion in CHIRP_CRITERIA[1:]
                              if answer.get(_field_of(criterion))}
        answer["scores"] = {side: answer[f"score-{side}"] for side in Side.values if answer.get(f"score-{side}")}
        return answer


def pairwise_material(unit, assignment=None):
    task = pairwise_task(assignment=assignment, unit=unit)
    instance = task["battle"].instance
    return TaskMaterial(instruction=instance.instruction, gallery=gallery(instance.ordered_images()),
                        response_1=task["left"].text, response_2=task["right"].text,
                        criteria=bool(task["criteria"]), rubric=task["rubric"])


def pairwise_context(material, form):
    questions = [
        {"name": _field_of(criterion), "title": CRITERION_QUESTIONS[criterion][0],
         "text": CRITERION_QUESTIONS[criterion][1], "value": form.shown(_field_of(criterion))}
        for criterion in ("overall", *_asked_criteria(material))
    ]
    scores = [
        {"name": f"score-{side}", "title": f"Score of Assistant {number}", "value": form.shown(f"score-{side}")}
        for number, side in enumerate(Side.values, start=1)
    ] if material.rubric else []
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


def store_pairwise(*, answer, assignment_id, worker):
    # The choices name the shown sides; the service maps them to A and B with the stored order.
    judgement = submit_pairwise_judgement(
        assignment_id=assignment_id, worker=worker, choice=answer["choice"], criteria=answer["criteria"],
        rubric_scores=answer["scores"], active_seconds=answer["active_seconds"],
    )
    return f"judgement-{judgement.pk}"


def pairwise_gold_answer(answer):
    # Gold battles are answered "left" / "right": response_1 is always shown on the left.
    return answer["choice"]
