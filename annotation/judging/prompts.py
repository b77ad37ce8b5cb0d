# The prompts below are quoted verbatim from the papers, so their lines stay as long as printed.
# ruff: noqa: E501
"""LLM judges of battles (paper §4 and Appendix F; CHIRP C.2.3; Prometheus-Vision F.2).

Text judges read the instruction-conditioned caption instead of the image, with the paper's
reference-free (Fig. 16) or reference-backed (Fig. 17) prompt, in both orderings of every battle;
an answer not in the asked format goes to the extraction prompt (Fig. 18), and a battle's winner
is the response that won more of its two orderings, else a tie (VisIT-Bench README). The vision
judge sends the images themselves (CHIRP's GPT-4V set-up); the Prometheus judge scores each
response 1-5 against a rubric.

Every request is cached under the hash of its full body, so running a judge again, or resuming
one that failed half-way, pays only for what was never answered.
"""

import base64
import hashlib
import json
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Sum
from django.utils import timezone

from annotation import llm
from annotation.exceptions import AnnotationError
from annotation.models import CHIRP_CRITERIA, JudgeCall, Judgement, JudgeRun

logger = logging.getLogger(__name__)

# --- the paper's prompts (Appendix F), word for word ----------------------------------------------

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

_OVERALL = re.compile(
    r"Overall,?\s+(?:\*\*)?Response\s+\(?([AB12])\)?(?:\*\*)?\s+is\s+(?:\w+\s+)?better",
    re.IGNORECASE,
)
_FINAL_ANSWER = re.compile(r"Final\s+Answer\s*:\s*(?:Response\s+)?\(?([AB12])\b", re.IGNORECASE)
_BARE_CHOICE = re.compile(r"^\W*(?:Assistant\s+)?([12])\W*$", re.IGNORECASE)
_PROMETHEUS_RESULT = re.compile(r"\[RESULT\]\s*\(?([1-5])\b")
_POSITION = {"A": 1, "B": 2, "1": 1, "2": 2}

TEXT_MODES = (JudgeRun.Mode.REFERENCE_FREE, JudgeRun.Mode.REFERENCE_BACKED)


# --- parsing -------------------------------------------------------------------------------------


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
    a = sum(1 for winner in winners if winner == Judgement.Winner.A)
    b = sum(1 for winner in winners if winner == Judgement.Winner.B)
    return Judgement.Winner.A if a > b else Judgement.Winner.B if b > a else Judgement.Winner.TIE


# --- building requests ---------------------------------------------------------------------------


def _chat(model, messages):
    return {
        "model": model,
        "messages": messages,
        "max_tokens": settings.JUDGE_MAX_OUTPUT_TOKENS,
        "temperature": settings.JUDGE_TEMPERATURE,
    }


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


def image_urls(instance):
    """URLs a vision model can fetch: stored files travel inline as data URLs."""
    urls = []
    for image in instance.ordered_images():
        if image.url:
            urls.append(image.url)
            continue
        with image.file.open("rb") as handle:
            data = base64.b64encode(handle.read()).decode("ascii")
        kind = (image.file.name.rsplit(".", 1)[-1] or "jpeg").lower().replace("jpg", "jpeg")
        urls.append(f"data:image/{kind};base64,{data}")
    return urls


def _image_parts(instance):
    return [{"type": "image_url", "image_url": {"url": url}} for url in image_urls(instance)]


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
            *_image_parts(instance),
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
    content = [*_image_parts(instance), {"type": "text", "text": prompt}]
    return _chat(model, [{"role": "user", "content": content}])


def answer_text(response):
    """(text, refused) of a stored chat completion; a refusal's own words are kept as its text."""
    choices = (response or {}).get("choices") or [{}]
    message = choices[0].get("message") or {}
    refusal = message.get("refusal")
    return (message.get("content") or refusal or "").strip(), bool(refusal)


# --- running a judge -----------------------------------------------------------------------------


def base_url_label():
    """Where the judge runs, for the record: the server's origin and never a key."""
    if not settings.JUDGE_BASE_URL:
        return "api.openai.com"
    parts = urlsplit(settings.JUDGE_BASE_URL)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"


def create_judge_run(*, study, mode, engine=None, concurrency=0, use_batch_api=False):
    if not study.battles.exists():
        raise AnnotationError(f"“{study.name}” has no battles to judge; sample them first.")
    if mode == JudgeRun.Mode.PROMETHEUS and not (study.rubric or study.rubrics.exists()):
        raise AnnotationError(f"“{study.name}” has no score rubric for the Prometheus judge.")
    engine = engine or settings.JUDGE_MODEL
    if not engine:
        raise AnnotationError("No judge model is configured: set JUDGE_MODEL (e.g. gpt-4).")
    return JudgeRun.objects.create(
        study=study,
        mode=mode,
        engine=engine,
        base_url_label=base_url_label(),
        concurrency=concurrency,
        use_batch_api=use_batch_api,
    )


@dataclass
class _Item:
    """One judgement to make: a battle, an ordering and a criterion, and the calls it needs."""

    battle: object
    ordering: str
    criterion: str
    requests: list
    answers: list = field(default_factory=list)
    fallback_request: dict | None = None


def _plan(run, battles):
    items = []
    for battle in battles:
        instance, a, b = battle.instance, battle.response_a.text, battle.response_b.text
        if run.mode == JudgeRun.Mode.PROMETHEUS:
            rubric = run.study.rubric_for(instance)
            if not rubric:
                raise AnnotationError(f"No score rubric for instance #{instance.pk}.")
            requests = [
                prometheus_request(
                    model=run.engine, instance=instance, response=text, rubric=rubric
                )
                for text in (a, b)
            ]
            items.append(_Item(battle, Judgement.Ordering.AB, "overall", requests))
            continue
        for criterion in _criteria(run):
            for ordering, first, second in (("ab", a, b), ("ba", b, a)):
                request = pairwise_request(
                    mode=run.mode,
                    model=run.engine,
                    instance=instance,
                    first=first,
                    second=second,
                    criterion=criterion,
                )
                items.append(_Item(battle, ordering, criterion, [request]))
    return items


def _store_call(run, sha, request, response, *, via_batch=False):
    """Cache one answer as paid for by this run; the run's counters move in the same transaction,
    so a kill between the two can neither lose the tokens nor count them twice."""
    usage = response.get("usage") or {}
    prompt_tokens = usage.get("prompt_tokens") or 0
    completion_tokens = usage.get("completion_tokens") or 0
    try:
        with transaction.atomic():
            call = JudgeCall.objects.create(
                request_sha256=sha,
                request=request,
                response=response,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=llm.cost_usd(
                    model=request["model"], prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, via_batch=via_batch,
                ) or Decimal(0),
                via_batch=via_batch,
                run=run,
            )
            refresh_counters(run)
    except IntegrityError:
        # Another run asked the same thing at the same moment; its answer is as good as ours.
        call = JudgeCall.objects.get(request_sha256=sha)
    return call


def _answer_all(run, client, requests):
    """Every request answered, from the cache or the model: {sha: JudgeCall}."""
    by_sha = {}
    for request in requests:
        by_sha.setdefault(request_sha256(request), request)
    calls = {
        call.request_sha256: call for call in JudgeCall.objects.filter(request_sha256__in=by_sha)
    }
    missing = {sha: request for sha, request in by_sha.items() if sha not in calls}
    if missing and run.use_batch_api:
        calls.update(_answer_by_batch(run, client, missing))
    elif missing:
        calls.update(_answer_concurrently(run, client, missing))
    return calls


def _answer_concurrently(run, client, missing):
    """Threads only wait on the network; the database is written from this thread alone.

    Each answer is stored as it arrives, so a worker killed half-way has paid only for answers it
    kept. When storing fails (the database is gone) the requests not yet sent are cancelled
    rather than paid for and thrown away; the job's retry asks for them later.
    """
    calls, failures = {}, []
    workers = max(1, run.concurrency or settings.JUDGE_CONCURRENCY)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="judge") as pool:
        futures = {
            pool.submit(
                lambda body: client.chat.completions.create(**body).model_dump(mode="json"), request
            ): sha
            for sha, request in missing.items()
        }
        for future in as_completed(futures):
            sha = futures[future]
            try:
                response = future.result()
            except Exception as error:  # noqa: BLE001 - the others still get stored and cached
                failures.append(error)
                continue
            try:
                calls[sha] = _store_call(run, sha, missing[sha], response)
            except Exception:
                for pending in futures:
                    pending.cancel()
                raise
    if failures:
        logger.warning("Judge run %s: %s of %s calls failed.", run.pk, len(failures), len(missing))
        raise failures[0]
    return calls


def _answer_by_batch(run, client, missing):
    """The OpenAI Batch API: upload the requests, wait for the batch, read its answers."""
    lines = "".join(
        json.dumps(
            {"custom_id": sha, "method": "POST", "url": "/v1/chat/completions", "body": request}
        )
        + "\n"
        for sha, request in missing.items()
    )
    upload = client.files.create(
        file=(f"judge-run-{run.pk}.jsonl", lines.encode("utf-8")), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"judge_run": str(run.pk)},
    )
    run.batch_ids = [*run.batch_ids, batch.id]
    run.save(update_fields=["batch_ids"])
    while batch.status not in ("completed", "failed", "expired", "cancelled"):
        time.sleep(settings.JUDGE_BATCH_POLL_SECONDS)
        batch = client.batches.retrieve(batch.id)
    calls = {}
    if batch.output_file_id:
        for line in client.files.content(batch.output_file_id).text.splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            response = row.get("response") or {}
            sha = row.get("custom_id")
            if sha in missing and response.get("status_code") == 200:
                calls[sha] = _store_call(run, sha, missing[sha], response["body"], via_batch=True)
    if len(calls) < len(missing):
        raise AnnotationError(
            f"Batch {batch.id} ended {batch.status} with {len(missing) - len(calls)} of "
            f"{len(missing)} requests unanswered; run the judge again to retry only those."
        )
    return calls


def _decide(run, call):
    """(winner position 1/2 or None, text, refused) of a pairwise answer, before any fallback."""
    text, refused = answer_text(call.response)
    position = parse_overall(text)
    if position is None and run.mode == JudgeRun.Mode.VISION:
        position = parse_bare_choice(text)
    return position, text, refused


def _winner(ordering, position):
    if position is None:
        return Judgement.Winner.TIE
    first_is_a = ordering == Judgement.Ordering.AB
    return Judgement.Winner.A if (position == 1) == first_is_a else Judgement.Winner.B


# --- a run in chunks ------------------------------------------------------------------------------
#
# A background run is a start job, one job per chunk of battles and a finish job
# (tasks/judging.py), each under its own lease, so no job runs longer than a chunk and a second
# delivery of any of them exits at once. What is done is read back from the stored judgements.

ACTIVE_STATUSES = (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING, JudgeRun.Status.RETRYING)


def _criteria(run):
    if run.mode == JudgeRun.Mode.VISION and run.study.with_criteria:
        return CHIRP_CRITERIA
    return CHIRP_CRITERIA[:1]


def _judgements_per_battle(run):
    return 1 if run.mode == JudgeRun.Mode.PROMETHEUS else 2 * len(_criteria(run))


def _calls_per_battle(run):
    # Prometheus asks twice for its one judgement: once per response.
    return 2 if run.mode == JudgeRun.Mode.PROMETHEUS else _judgements_per_battle(run)


def battles_per_chunk(run):
    return max(1, settings.JUDGE_CHUNK_CALLS // _calls_per_battle(run))


def _battle_ids(run):
    return list(run.study.battles.order_by("pk").values_list("pk", flat=True))


def _chunks(run):
    ids, size = _battle_ids(run), battles_per_chunk(run)
    return [ids[start:start + size] for start in range(0, len(ids), size)]


def unfinished_chunks(run):
    """Indexes of the chunks with a judgement still missing."""
    stored = dict(
        Judgement.objects.filter(run=run).values("battle_id").annotate(n=Count("pk"))
        .values_list("battle_id", "n")
    )
    expected = _judgements_per_battle(run)
    return [
        index for index, ids in enumerate(_chunks(run))
        if any(stored.get(battle_id, 0) < expected for battle_id in ids)
    ]


def refresh_counters(run):
    """A run's progress, tokens and cost, derived from the calls it paid for and the judgements it
    stored: recounting after a restart gives the same figures, never a double count."""
    paid = JudgeCall.objects.filter(run=run).aggregate(
        n=Count("pk"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"),
        cost=Sum("cost_usd"),
    )
    judgements = Judgement.objects.filter(run=run)
    used = set()
    for field_name in ("call", "fallback_call", "call_b"):
        used.update(judgements.exclude(**{f"{field_name}__isnull": True})
                    .values_list(f"{field_name}_id", flat=True))
    cached = JudgeCall.objects.filter(pk__in=used).exclude(run=run).count()
    fallback = judgements.exclude(fallback_call__isnull=True).values("fallback_call").distinct().count()
    JudgeRun.objects.filter(pk=run.pk).update(
        total_calls=len(_battle_ids(run)) * _calls_per_battle(run) + fallback,
        done_calls=paid["n"] + cached,
        cached_calls=cached,
        fallback_calls=fallback,
        prompt_tokens=paid["prompt"] or 0,
        completion_tokens=paid["completion"] or 0,
        cost_usd=paid["cost"] or Decimal(0),
    )


def start_judge_run(*, run):
    """Mark a queued run running and return the indexes of its chunks still to judge.

    A run that cannot reach its model (no key) fails here, with the reason, before any chunk.
    """
    run = JudgeRun.objects.select_related("study").get(pk=run.pk)
    if run.status not in ACTIVE_STATUSES:
        return []
    llm.judge_client().close()
    JudgeRun.objects.filter(pk=run.pk).update(
        status=JudgeRun.Status.RUNNING, started_at=run.started_at or timezone.now(), error=""
    )
    refresh_counters(run)
    return unfinished_chunks(run)


def judge_chunk(*, run, index):
    """Judge one chunk of the run's battles and store its judgements; idempotent.

    Returns True when no chunk of the run is left unjudged.
    """
    run = JudgeRun.objects.select_related("study").get(pk=run.pk)
    if run.status not in ACTIVE_STATUSES:
        return False
    chunks = _chunks(run)
    if index < len(chunks) and index in unfinished_chunks(run):
        battles = list(
            run.study.battles.filter(pk__in=chunks[index]).order_by("pk")
            .select_related("instance__family", "instance__current_caption", "response_a",
                            "response_b")
            .prefetch_related("instance__instanceimage_set__image")
        )
        with llm.judge_client() as client:
            items = _plan(run, battles)
            primary = [request for item in items for request in item.requests]
            calls = _answer_all(run, client, primary)
            for item in items:
                item.answers = [calls[request_sha256(r)] for r in item.requests]
            if run.mode == JudgeRun.Mode.PROMETHEUS:
                _store_prometheus(run, items)
            else:
                _store_pairwise(run, client, items)
    return not unfinished_chunks(run)


def finish_judge_run(*, run):
    """Mark the run done once every chunk is judged; until then it stays running."""
    run = JudgeRun.objects.get(pk=run.pk)
    if run.status in ACTIVE_STATUSES and not unfinished_chunks(run):
        refresh_counters(run)
        JudgeRun.objects.filter(pk=run.pk).update(
            status=JudgeRun.Status.DONE, error="", finished_at=timezone.now()
        )
    return JudgeRun.objects.get(pk=run.pk)


def record_job_status(run_id, status, error=""):
    """What a run shows while its jobs run: "retrying" with the cause between attempts, "failed"
    with the reason once the retries are spent. A run that is over is left as it ended."""
    active = JudgeRun.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES)
    if status == JudgeRun.Status.RETRYING:
        active.update(status=JudgeRun.Status.RETRYING, error=error)
    elif status == JudgeRun.Status.FAILED:
        active.update(status=JudgeRun.Status.FAILED, error=error, finished_at=timezone.now())
    elif status == JudgeRun.Status.RUNNING:
        active.exclude(status=JudgeRun.Status.PENDING).update(status=JudgeRun.Status.RUNNING)


def run_again(*, run):
    """Queue a finished or failed run again (cached answers cost nothing); a run in progress is
    refused, since two copies of one run would pay for the same answers twice."""
    from tasks.jobs import enqueue

    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run.pk)
        if run.status in ACTIVE_STATUSES:
            raise AnnotationError(
                f"Judge run #{run.pk} is {run.get_status_display().lower()}; it can run again "
                "once it has finished or failed."
            )
        run.status, run.error, run.finished_at = JudgeRun.Status.PENDING, "", None
        run.save(update_fields=["status", "error", "finished_at"])
        enqueue("tasks.run_judge", run.pk)
    return run


def run_judge(*, run):
    """Judge every battle of the run's study here and now, chunk by chunk (commands and tests; the
    admin queues the same steps as jobs). Errors leave the run failed with its answers cached,
    so running it again resumes."""
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.PENDING, error="")
    try:
        for index in start_judge_run(run=run):
            judge_chunk(run=run, index=index)
    except Exception as error:
        record_job_status(run.pk, JudgeRun.Status.FAILED, str(error))
        run.refresh_from_db()
        raise
    finish_judge_run(run=run)
    run.refresh_from_db()
    return run


def _store_pairwise(run, client, items):
    fallback_model = settings.JUDGE_FALLBACK_MODEL or run.engine
    decided = []
    for item in items:
        position, text, refused = _decide(run, item.answers[0])
        if position is None and text:
            item.fallback_request = extraction_request(
                mode=run.mode, model=fallback_model, answer=text
            )
        decided.append((item, position, text, refused))
    fallbacks = [item.fallback_request for item in items if item.fallback_request]
    fallback_calls = _answer_all(run, client, fallbacks) if fallbacks else {}
    with transaction.atomic():
        for item, position, text, refused in decided:
            fallback_call = None
            if item.fallback_request:
                fallback_call = fallback_calls[request_sha256(item.fallback_request)]
                extracted, _ = answer_text(fallback_call.response)
                position = parse_final_answer(extracted)
                if run.mode == JudgeRun.Mode.VISION and position is None:
                    position = parse_bare_choice(extracted)
            Judgement.objects.update_or_create(
                run=run,
                battle=item.battle,
                ordering=item.ordering,
                criterion=item.criterion,
                defaults={
                    "cot": text,
                    "winner": _winner(item.ordering, position),
                    "used_fallback": fallback_call is not None,
                    # No decision even after extraction: a refusal, recorded as a tie.
                    "refused": refused or position is None,
                    "call": item.answers[0],
                    "fallback_call": fallback_call,
                },
            )
        refresh_counters(run)


def _store_prometheus(run, items):
    with transaction.atomic():
        for item in items:
            (feedback_a, score_a), (feedback_b, score_b) = (
                parse_prometheus(answer_text(call.response)[0]) for call in item.answers
            )
            if score_a is None or score_b is None or score_a == score_b:
                winner = Judgement.Winner.TIE
            else:
                winner = Judgement.Winner.A if score_a > score_b else Judgement.Winner.B
            Judgement.objects.update_or_create(
                run=run,
                battle=item.battle,
                ordering=item.ordering,
                criterion=item.criterion,
                defaults={
                    "cot": f"Response A: {feedback_a}\n\nResponse B: {feedback_b}",
                    "winner": winner,
                    "score_a": score_a,
                    "score_b": score_b,
                    "refused": score_a is None or score_b is None,
                    "call": item.answers[0],
                    "call_b": item.answers[1],
                },
            )
        refresh_counters(run)
