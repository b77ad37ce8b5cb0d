# The prompts below are quoted verbatim from the papers, so their lines stay as long as printed.
# ruff: noqa: E501
"""The judges' requests: the papers' prompts word for word, and the chat requests built from them.

A request's hash (`request_sha256`) is the key its answer is cached under (annotation/judging/calls.py).
"""

import hashlib
import json

from django.conf import settings

from annotation.exceptions import AnnotationError
from annotation.llm import image_parts
from annotation.models import CHIRP_CRITERIA, JudgeRun

REFERENCE_FREE_SYSTEM = """You are ImageTaskEvaluationGPT, an expert language model at judging whether or not a response adequately addresses an instruction in the context of an image. More specifically, you will be given the following:
1. An image context: This will describe the contents of an image with sufficient detail to address the instruction.
2. An instruction: This is a question, an imperative request, or something similar about the image which requires a response.
3. Two responses, response A and response B: These two responses attempt to address the instruction in the context of the image.
Your job is to judge whether response A or response B better. A and B are randomly ordered.
Some things to remember:
- Even though you are just a language model, the image description will be sufficiently detailed so that your judgements can be accurate.
- You are capable of judging response quality, accounting for important factors like correctness, relevance, fluency, specificity, etc.
- You think step-by-step, but ultimately respond with "Response A" or "Response B\""""

REFERENCE_FREE_USER = """I will describe an image to you, and provide an instruction. Then, I will give you two candidate responses that address the instruction in the context of the image: these will be labelled "Response A" and "Response B". Your job is to first reason step-by-step about which response is best in terms of accuracy, specificity, fluency, etc. After reasoning step-by-step and comparing the pros/cons of each response, in the end, respond with "Overall, Response X is better." where X is either A or B."""

REFERENCE_FREE_ASSISTANT = """Sure, please provide the image context, the instruction, and the two candidate responses, Response A and Response B. Then, I will think step-by-step and provide my ultimate judgement as to which response is better."""

REFERENCE_FREE_TEMPLATE = """OK. Here is the image description, the instruction, and the two response options, Response A and Response B.
Image context: {context}
Instruction: {instruction}
Response A: {response_a}
Response B: {response_b}
Think step-by-step and finish your response with "Overall, Response X is better." where X is either A or B."""

# Fig. 17 as printed, "imparative" included: the prompt is the experiment.
REFERENCE_BACKED_SYSTEM = """You are ImageTaskEvaluationGPT, an expert language model at judging whether or not a response adequately addresses an instruction in the context of an image. More specifically, you will be given the following:
1. An image context: This will describe the contents of an image with sufficient detail to address the instruction.
2. An instruction: This is a question, an imparative request, or something similar about the image which requires a response.
3. A reference output: This is a high-quality example output that humans have judged to be an accurate response for the input instruction.
4. Two responses, response A and response B: These two responses attempt to address the instruction in the context of the image.
Your job is to judge whether response A or response B better. A and B are randomly ordered. Some things to remember:
- Even though you are just a language model, the image description will be sufficiently detailed so that your judgements can be accurate.
- Take the high-quality reference into account when making your judgements, but remember: some instructions are more open-ended than others, so for those cases, a high quality response can differ from the reference.
- You are capable of judging response quality, accounting for important factors like correctness, relevance, fluency, specificity, etc.
- You think step-by-step, but ultimately respond with "Response A" or "Response B\""""

REFERENCE_BACKED_USER = """I will describe an image to you, and provide an instruction. Then, I will provide a reference output which is an example of a high quality output for that instruction in the context of the image. Then, I will give you two candidate responses that address the instruction in the context of the image: these will be labelled "Response A" and "Response B". Your job is to first reason step-by-step about which response is best in terms of accuracy, specificity, fluency, etc. After reasoning step-by-step and comparing the pros/cons of each response, in the end, respond with "Overall, Response X is better." where X is either A or B."""

REFERENCE_BACKED_ASSISTANT = """Sure, please provide the image context, the instruction, the reference, and the two candidate responses, Response A and Response B. Then, I will think step-by-step and provide my ultimate judgement as to which response is better."""

REFERENCE_BACKED_TEMPLATE = """OK. Here is the image description, the instruction, the high-quality reference, and the two response options, Response A and Response B.
Image context: {context}
Instruction: {instruction}
High quality reference: {reference}
Response A: {response_a}
Response B: {response_b}
Think step-by-step and finish your response with "Overall, Response X is better." where X is either A or B."""

EXTRACTION_SYSTEM = """You are FinalAnswerExtractionGPT, an expert language model at extracting multiple choice answers from written out from longer explanations. You will be given several sentences describing a thought process which should eventually contain a final answer, either A or B. Your job is to extract the final answer that the explanation arrives at.
Some things to remember:
- Keep your answers short: only output "Final Answer: X" where X is A or B
- If the explanation doesn't mention a final choice explicitly, you can output "Unknown\""""

EXTRACTION_SUFFIX = "\nPlease extract the final answer from the above text."

# Fig. 18's two in-context examples: an answer in the wrong format, and a refusal.
EXTRACTION_EXAMPLES = (
    (
        """Step 1: Compare the two responses to the instruction
- The instruction asks if people are required to stop and requests an explanation.
Step 2: Assess Response A
- Response A indicates that people should stop due to the presence of a stop sign. However, it doesn't consider the fact that the sign is pressed against the bus, and the LED lights are off.
Step 3: Assess Response B
- Response B simply says "yes," acknowledging that people should stop, but it doesn't provide the explanation required by the instruction.
Step 4: Compare specificity, fluency, and other factors
- Response A is more specific and fluent but misconstrues the image description.
- Response B is accurate in that it acknowledges the stop sign but lacks an explanation.
Overall, since neither response is fully correct, it is difficult to declare a better response. However, given the fact that Response B acknowledges the prominent stop sign, I would say that Response B is slightly better, but it should also explain how the situation indicates that people should stop.""",
        "Final Answer: Response B is slightly better, but it should also explain how the situation indicates that people should stop.",
    ),
    (
        """Step 1: Consider the image context, which states that the original thirteen colonies are shown with New Hampshire specifically highlighted in a darker green.
Step 2: Assess the accuracy of Response A, which claims that the colony shown is "Virginia." This is not accurate since the image context indicates New Hampshire being highlighted.
Step 3: Assess the accuracy of Response B, which claims that the colony shown is the Massachusetts Bay Colony. This response is also not accurate, as the image context states New Hampshire is the highlighted colony.
Step 4: In terms of accuracy, both responses are incorrect. Neither response is consistent with the image context.
Step 5: Consider other factors like fluency and specificity. Both responses seem fluent and specific in nature.
After considering these factors, none of the responses are accurate given the information provided in the image context. However, I am unable to provide an "Overall, Response X is better." judgement in this case as both responses are incorrect and neither stands out as being better than the other.""",
        "Final Answer: Unknown.",
    ),
)

# CHIRP Appendix C.2.3, Fig. 21: the GPT-4V (R) prompt, one question per criterion.
VISION_INSTRUCTION = """
You are a helpful assistant. You will be shown an image and a related question, along with responses from two assistants. The assistants' responses are meant to answer the given question.

Your task is to compare and evaluate the two responses to the given question about the image.

Image:
"""

VISION_CRITERIA = dict(
    zip(
        CHIRP_CRITERIA,
        (
            "Which assistant's response do you prefer overall, considering all factors?",
            "Which assistant's response is more relevant to the question and provides a more complete answer?",
            "Which assistant's response displays a better understanding of concepts and better reasoning?",
            "Which assistant accurately describes the image without adding or describing objects or elements that don't exist in the image?",
            "Which assistant's description of the image is more detailed, taking into consideration both the amount and quality of the details provided?",
        ),
        strict=True,
    )
)

VISION_TEMPLATE = """
Question: {question}

Assistant 1 Response: {response_1}

Assistant 2 Response: {response_2}

{criterion}
Please do not provide Tie as an evaluation. You have to select between Assistant 1 or Assistant 2. Reason about your thought process before giving the final answer.
"""

VISION_EXTRACTION = """You will receive an evaluation of two responses including the preferred assistants response. Your task is to analyze the text, determine which assistant's response is preferred, and output the number corresponding to the preferred assistant (either 1 or 2). Please only respond with the number correspondig to the preferred assistant and no additional information. For exmaple: 2.

Evaluation:
{evaluation}"""

# Prometheus-Vision Appendix F.2, laid out as Prometheus's own template.
PROMETHEUS_TEMPLATE = """###Task Description:
An instruction (might include an Input inside it), a response to evaluate, a reference answer that gets a score of 5, image and a score rubric representing an evaluation criterion is given.
1. Write a detailed feedback that assesses the quality of the response strictly based on the given score rubric, not evaluating in general.
2. After writing a feedback, write a score that is an integer between 1 and 5. You should refer to the score rubric.
3. The output format should look as follows: "Feedback: (write a feedback for criteria) [RESULT] (an integer number between 1 and 5)"
4. Please do not generate any other opening, closing, and explanations.

###The instruction to evaluate:
{instruction}

###Response to evaluate:
{response}

###Reference Answer (Score 5):
{reference}

###Score Rubrics:
{rubric}

###Feedback: """


def _chat(model, messages):
    return {
        "model": model,
        "messages": messages,
        "max_tokens": settings.JUDGE_MAX_OUTPUT_TOKENS,
        "temperature": settings.JUDGE_TEMPERATURE,
    }


def prompts_sha256(mode):
    """A fingerprint of the prompt texts a mode's requests are built from, kept on each run so two
    runs of one mode and model are known to have asked the same question (or not)."""
    texts = {
        JudgeRun.Mode.REFERENCE_FREE: [REFERENCE_FREE_SYSTEM, REFERENCE_FREE_USER, REFERENCE_FREE_ASSISTANT,
                                       REFERENCE_FREE_TEMPLATE, EXTRACTION_SYSTEM, EXTRACTION_SUFFIX,
                                       EXTRACTION_EXAMPLES],
        JudgeRun.Mode.REFERENCE_BACKED: [REFERENCE_BACKED_SYSTEM, REFERENCE_BACKED_USER,
                                         REFERENCE_BACKED_ASSISTANT, REFERENCE_BACKED_TEMPLATE,
                                         EXTRACTION_SYSTEM, EXTRACTION_SUFFIX, EXTRACTION_EXAMPLES],
        JudgeRun.Mode.VISION: [VISION_INSTRUCTION, VISION_CRITERIA, VISION_TEMPLATE, VISION_EXTRACTION],
        JudgeRun.Mode.PROMETHEUS: [PROMETHEUS_TEMPLATE],
    }[mode]
    return request_sha256(texts)


def request_sha256(request):
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def image_context(instance):
    """The instruction-conditioned caption(s) a text judge reads instead of the image."""
    caption = instance.current_caption
    texts = [text.strip() for text in (caption.texts if caption else []) if text.strip()]
    if not texts:
        raise AnnotationError(
            f"Instance #{instance.pk} has no caption for a text-only judge to read."
        )
    if len(texts) == 1:
        return texts[0]
    return " ".join(f"Image {n}: {text}" for n, text in enumerate(texts, start=1))


def _reference_text(instance):
    text = instance.reference_output.strip()
    if not text:
        raise AnnotationError(
            f"Instance #{instance.pk} has no verified reference to judge against."
        )
    return text


def pairwise_request(*, mode, model, instance, first, second, criterion="overall"):
    """The judge's request with `first` shown as Response A (or Assistant 1)."""
    if mode == JudgeRun.Mode.VISION:
        evaluation = VISION_TEMPLATE.format(
            question=instance.instruction,
            response_1=first,
            response_2=second,
            criterion=VISION_CRITERIA[criterion],
        )
        content = [
            {"type": "text", "text": VISION_INSTRUCTION},
            *image_parts(instance),
            {"type": "text", "text": evaluation},
        ]
        return _chat(model, [{"role": "user", "content": content}])
    if mode == JudgeRun.Mode.REFERENCE_BACKED:
        system, user, assistant = (
            REFERENCE_BACKED_SYSTEM,
            REFERENCE_BACKED_USER,
            REFERENCE_BACKED_ASSISTANT,
        )
        prompt = REFERENCE_BACKED_TEMPLATE.format(
            context=image_context(instance),
            instruction=instance.instruction,
            reference=_reference_text(instance),
            response_a=first,
            response_b=second,
        )
    else:
        system, user, assistant = (
            REFERENCE_FREE_SYSTEM,
            REFERENCE_FREE_USER,
            REFERENCE_FREE_ASSISTANT,
        )
        prompt = REFERENCE_FREE_TEMPLATE.format(
            context=image_context(instance),
            instruction=instance.instruction,
            response_a=first,
            response_b=second,
        )
    return _chat(
        model,
        [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": prompt},
        ],
    )


def extraction_request(*, mode, model, answer):
    """Fig. 18's extraction prompt (CHIRP's for the vision judge) around an unparsed answer."""
    if mode == JudgeRun.Mode.VISION:
        return _chat(
            model, [{"role": "user", "content": VISION_EXTRACTION.format(evaluation=answer)}]
        )
    messages = [{"role": "system", "content": EXTRACTION_SYSTEM}]
    for example, extracted in EXTRACTION_EXAMPLES:
        messages += [
            {"role": "user", "content": example + EXTRACTION_SUFFIX},
            {"role": "assistant", "content": extracted},
        ]
    messages.append({"role": "user", "content": answer + EXTRACTION_SUFFIX})
    return _chat(model, messages)


def prometheus_request(*, model, instance, response, rubric):
    prompt = PROMETHEUS_TEMPLATE.format(
        instruction=instance.instruction,
        response=response,
        reference=_reference_text(instance),
        rubric=rubric,
    )
    content = [*image_parts(instance), {"type": "text", "text": prompt}]
    return _chat(model, [{"role": "user", "content": content}])
