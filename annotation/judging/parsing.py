"""Reading a judge's answers: which response one answer prefers, a Prometheus score, and a
battle's winner from its orderings."""

import re

from annotation.models import JudgeJudgement

_OVERALL = re.compile(
    r"Overall,?\s+(?:\*\*)?Response\s+\(?([AB12])\)?(?:\*\*)?\s+is\s+(?:\w+\s+)?better",
    re.IGNORECASE,
)
_FINAL_ANSWER = re.compile(r"Final\s+Answer\s*:\s*(?:Response\s+)?\(?([AB12])\b", re.IGNORECASE)
_BARE_CHOICE = re.compile(r"^\W*(?:Assistant\s+)?([12])\W*$", re.IGNORECASE)
_PROMETHEUS_RESULT = re.compile(r"\[RESULT\]\s*\(?([1-5])\b")
_POSITION = {"A": 1, "B": 2, "1": 1, "2": 2}


def parse_overall(text):
    """1 or 2 from the last "Overall, Response X is better." (X is A/B, or 1/2), else None."""
    matches = _OVERALL.findall(text or "")
    return _POSITION[matches[-1].upper()] if matches else None


def parse_final_answer(text):
    """1 or 2 from the extraction prompt's "Final Answer: X"; None for "Unknown" or no answer."""
    match = _FINAL_ANSWER.search(text or "")
    return _POSITION[match.group(1).upper()] if match else None


def parse_bare_choice(text):
    """1 or 2 when the vision judge answered with the number alone (CHIRP's simple format)."""
    match = _BARE_CHOICE.match((text or "").strip())
    return int(match.group(1)) if match else None


def parse_prometheus(text):
    """(feedback, score) from "Feedback: ... [RESULT] n"; score None when absent."""
    text = text or ""
    match = _PROMETHEUS_RESULT.search(text)
    feedback = text[: match.start()] if match else text
    feedback = feedback.strip().removeprefix("Feedback:").strip()
    return feedback, int(match.group(1)) if match else None


def combine_orderings(winners):
    """The battle's winner from its judgements ('a', 'b' or 'tie'): count wins; equal is a tie."""
    a = sum(1 for winner in winners if winner == JudgeJudgement.Winner.A)
    b = sum(1 for winner in winners if winner == JudgeJudgement.Winner.B)
    return JudgeJudgement.Winner.A if a > b else JudgeJudgement.Winner.B if b > a else JudgeJudgement.Winner.TIE


def answer_text(response):
    """(text, refused) of a stored chat completion; a refusal's own words are kept as its text."""
    choices = (response or {}).get("choices") or [{}]
    message = choices[0].get("message") or {}
    refusal = message.get("refusal")
    return (message.get("content") or refusal or "").strip(), bool(refusal)
