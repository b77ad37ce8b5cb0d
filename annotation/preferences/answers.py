"""Answers from endpoints: a tournament's endpoint models (annotation/models/endpoints.py) asked for
every verified instance they have no response to, with the instruction and the instance's images,
their answers stored as model responses with parameters, tokens and cost.

It runs like the judge (annotation/judging/): a start job, then one job per chunk of instances,
each under its own lease (tasks/answers.py), resumable after a kill. What is owed and what is done
are read back from the rows: an instance is owed while it has no response of the model's name, and
every answer is paid through its one EndpointCall row, made before the request is sent. A paid
answer is never asked again: it is stored with its response in one transaction. A call that was
on the wire when its worker died has an unknown outcome; as the judge asks again for what it never
stored, so does this, but as the same request, under the call's idempotency key.
"""

import logging
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from decimal import Decimal

import openai
from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from annotation import llm
from annotation.exceptions import AnnotationError
from annotation.models import EndpointCall, Instance, ModelEndpoint, ModelResponse
from annotation.preferences.eligible import eligible_instances
from crowdbench import outbound
from crowdbench.jobs import enqueue

logger = logging.getLogger(__name__)

IDEMPOTENCY_HEADER = "Idempotency-Key"


# --- what is owed --------------------------------------------------------------------------------


def _answered_ids(endpoint, instance_ids):
    return set(ModelResponse.objects.filter(instance_id__in=instance_ids, model_name=endpoint.model_name)
               .values_list("instance_id", flat=True))


def owed_instance_ids(endpoint, eligible=None):
    """Ids of the tournament's eligible instances the model has no response to, in order."""
    ids = [i.pk for i in (eligible if eligible is not None else eligible_instances(endpoint.tournament))]
    answered = _answered_ids(endpoint, ids)
    return [pk for pk in ids if pk not in answered]


@dataclass(frozen=True)
class Progress:
    """An endpoint model's answers, counted from its responses and its calls."""

    endpoint: ModelEndpoint
    total: int
    done: int
    failed: int
    in_flight: int
    cost_usd: object
    key_missing: str | None

    @property
    def unresolved(self):
        """Owed answers no call has failed on: what generation still has to try."""
        return self.total - self.done - self.failed


def progress(endpoint, eligible=None):
    eligible = eligible if eligible is not None else eligible_instances(endpoint.tournament)
    ids = [i.pk for i in eligible]
    done = _answered_ids(endpoint, ids)
    owed = [pk for pk in ids if pk not in done]
    calls = EndpointCall.objects.filter(endpoint=endpoint)
    paid = calls.filter(status__in=(EndpointCall.Status.ANSWERED, EndpointCall.Status.FAILED))
    return Progress(
        endpoint=endpoint, total=len(ids), done=len(done),
        failed=calls.filter(instance_id__in=owed, status=EndpointCall.Status.FAILED).count(),
        in_flight=calls.filter(instance_id__in=owed, status__in=(EndpointCall.Status.PENDING,
                                                                 EndpointCall.Status.SENT)).count(),
        cost_usd=paid.aggregate(cost=Sum("cost_usd"))["cost"] or Decimal(0),
        key_missing=llm.endpoint_key_missing(endpoint),
    )


def tournament_progress(tournament):
    endpoints = list(tournament.endpoint_models.all())
    if not endpoints:
        # The instances are not read for a tournament of imported predictions alone.
        return []
    eligible = eligible_instances(tournament)
    return [progress(endpoint, eligible) for endpoint in endpoints]


def owed_answers_message(tournament):
    """Why battles cannot be sampled yet: endpoint models with answers still to generate (a failed
    call does not hold battles back; the workflow page shows it). None when nothing is owed."""
    waiting = [p for p in tournament_progress(tournament) if p.unresolved > 0]
    if not waiting:
        return None
    return ("Generate the endpoint models' answers first: "
            + ", ".join(f"{p.endpoint.model_name} has {p.unresolved} of {p.total} still to answer"
                        for p in waiting)
            + ". Battles are drawn from the answers there are when they are sampled.")


# --- starting -------------------------------------------------------------------------------------


def start_generation(*, tournament):
    """Queue the generation of every endpoint model's owed answers; refused, with the reason, before
    anything is queued when a key is not set or the battles are already drawn. Calls that failed
    are tried again. Returns the endpoints queued."""
    with transaction.atomic():
        endpoints = _prepare(tournament)
        enqueue("tasks.generate_answers", tournament.pk)
    return endpoints


def _prepare(tournament):
    endpoints = list(tournament.endpoint_models.all())
    if not endpoints:
        raise AnnotationError(f"“{tournament.name}” names no endpoint model; add one on the tournament's page.")
    if tournament.battles.exists():
        raise AnnotationError(f"“{tournament.name}” already has its battles; answers generated now "
                              "would take part in none of them.")
    missing = [message for message in map(llm.endpoint_key_missing, endpoints) if message]
    if missing:
        raise AnnotationError(" ".join(missing))
    EndpointCall.objects.filter(endpoint__in=endpoints, status=EndpointCall.Status.FAILED).update(
        status=EndpointCall.Status.PENDING)
    ModelEndpoint.objects.filter(pk__in=[e.pk for e in endpoints]).update(error="")
    return endpoints


def chunks(endpoint):
    """The owed instances as spans of ids (first, last) of ANSWER_CHUNK_INSTANCES ids each, so no
    job outlives the broker's visibility timeout. A span is a fixed range of ids, not the next n
    owed instances, and its width depends on no setting of the endpoint (its concurrency may be
    changed while answers are generated): a start job delivered again, or planned again after
    some answers came or a form was saved, names the same chunks, so one chunk's lease covers its
    instances whoever planned it, and two chunks never share an instance."""
    size = settings.ANSWER_CHUNK_INSTANCES
    buckets = sorted({pk // size for pk in owed_instance_ids(endpoint)})
    return [(bucket * size, bucket * size + size - 1) for bucket in buckets]


def plan_generation(*, tournament):
    """[(endpoint id, first id, last id)] of every chunk owed; an endpoint without its key is
    marked failed with the reason rather than asked."""
    planned = []
    for endpoint in tournament.endpoint_models.all():
        missing = llm.endpoint_key_missing(endpoint)
        if missing:
            ModelEndpoint.objects.filter(pk=endpoint.pk).update(error=missing)
            continue
        planned += [(endpoint.pk, first, last) for first, last in chunks(endpoint)]
    return planned


def record_job_status(endpoint_id, status, error=""):
    """What an endpoint shows while its jobs run: the cause between attempts, the reason once the
    retries are spent; cleared when a chunk succeeds and none of its calls has failed."""
    endpoint = ModelEndpoint.objects.filter(pk=endpoint_id)
    if status in ("retrying", "failed"):
        endpoint.update(error=error)
    elif status == "done" and not EndpointCall.objects.filter(
            endpoint_id=endpoint_id, status=EndpointCall.Status.FAILED).exists():
        endpoint.update(error="")


# --- one chunk -------------------------------------------------------------------------------------


def request_body(endpoint, instance, parameters):
    """The chat request for one answer: the instance's images as image content parts, then its
    instruction, with the generation parameters its call was made with (a retry is the same
    request, whatever the endpoint's form says since)."""
    content = [*llm.image_parts(instance), {"type": "text", "text": instance.instruction}]
    return {"model": endpoint.model, "messages": [{"role": "user", "content": content}], **parameters}


def answer_chunk(*, endpoint, first, last):
    """Ask the endpoint for its owed answers to the instances with ids first..last and store them;
    idempotent. Raises the first transient error (the job retries with backoff) after storing
    every answer that came, else an AnnotationError naming the calls that failed for good."""
    endpoint = ModelEndpoint.objects.select_related("tournament").get(pk=endpoint.pk)
    owed = owed_instance_ids(endpoint, eligible_instances(endpoint.tournament, between=(first, last)))
    if not owed:
        return 0
    client = llm.endpoint_client(endpoint)
    # The call rows before any request: the row is the lock, and its key the request's identity.
    EndpointCall.objects.bulk_create(
        [EndpointCall(endpoint=endpoint, instance_id=pk, parameters=endpoint.parameters) for pk in owed],
        ignore_conflicts=True)
    calls = list(EndpointCall.objects.filter(endpoint=endpoint, instance_id__in=owed))
    for call in calls:
        if call.status == EndpointCall.Status.ANSWERED:
            # Paid, and its response since deleted: stored again from the answer, not asked again.
            _store_answer(endpoint, call, call.response)
    to_ask = [c for c in calls if c.status in (EndpointCall.Status.PENDING, EndpointCall.Status.SENT)]
    if not to_ask:
        return 0
    instances = {i.pk: i for i in Instance.objects.filter(pk__in=[c.instance_id for c in to_ask])
                 .prefetch_related("instanceimage_set__image")}
    bodies = {c.pk: request_body(endpoint, instances[c.instance_id], c.parameters) for c in to_ask}
    return _ask(endpoint, client, to_ask, bodies)


def _ask(endpoint, client, calls, bodies):
    """Threads only wait on the network; the database is written from this thread alone: each call
    is marked sent just before it goes out, at most the endpoint's concurrency at once, and each
    answer is stored as it arrives. So a kill leaves at most that many outcomes unknown."""
    transient, permanent, stored = [], [], 0
    waiting = list(calls)

    def send(call):
        return client.chat.completions.create(
            **bodies[call.pk], extra_headers={IDEMPOTENCY_HEADER: call.idempotency_key},
        ).model_dump(mode="json")

    def send_next(pool, in_flight):
        call = waiting.pop(0)
        EndpointCall.objects.filter(pk=call.pk).update(
            status=EndpointCall.Status.SENT, attempts=F("attempts") + 1, sent_at=timezone.now())
        in_flight[pool.submit(send, call)] = call

    with ThreadPoolExecutor(max_workers=endpoint.concurrency, thread_name_prefix="answers") as pool:
        in_flight = {}
        while waiting and len(in_flight) < endpoint.concurrency:
            send_next(pool, in_flight)
        while in_flight:
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                call = in_flight.pop(future)
                try:
                    response = future.result()
                except Exception as error:  # noqa: BLE001 - recorded on its call; the others go on
                    if _record_failure(endpoint, call, error):
                        transient.append(error)
                    else:
                        permanent.append(call)
                        if isinstance(error, (openai.AuthenticationError, openai.PermissionDeniedError)) or \
                                outbound.refusal(error):
                            waiting.clear()  # every other call would be refused the same way
                    continue
                if _store_answer(endpoint, call, response):
                    stored += 1
                else:
                    permanent.append(call)
            while waiting and len(in_flight) < endpoint.concurrency:
                send_next(pool, in_flight)
    if transient:
        logger.warning("%s: %s of %s calls failed for now.", endpoint.model_name, len(transient), len(calls))
        raise transient[0]
    if permanent:
        failed = EndpointCall.objects.filter(pk__in=[c.pk for c in permanent]).order_by("instance_id")
        first = failed.first()
        raise AnnotationError(
            f"{endpoint.model_name}: {len(permanent)} of {len(calls)} call(s) failed, e.g. instance "
            f"#{first.instance_id}: {first.error} Fix the cause and generate the answers again: only "
            "those are asked again.")
    return stored


def _store_answer(endpoint, call, response):
    """The paid answer and the model response made from it, in one transaction: an answer is never
    paid for without being kept. A response with no text is a failure of that call, kept with its
    cost. True when the response was stored."""
    usage = (response or {}).get("usage") or {}
    prompt_tokens = usage.get("prompt_tokens") or 0
    completion_tokens = usage.get("completion_tokens") or 0
    cost = llm.priced(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                      prices=(endpoint.input_price_per_million, endpoint.output_price_per_million))
    text, problem = _answer_text(response)
    with transaction.atomic():
        EndpointCall.objects.filter(pk=call.pk).update(
            status=EndpointCall.Status.FAILED if problem else EndpointCall.Status.ANSWERED,
            response=response, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            cost_usd=cost, error=problem or "", answered_at=timezone.now())
        if problem:
            return False
        # An answer imported for the same model meanwhile stays; this one is kept on its call.
        ModelResponse.objects.bulk_create([ModelResponse(
            instance_id=call.instance_id, model_name=endpoint.model_name, text=text,
            imported_from=f"endpoint: {endpoint.origin}"[:500], parameters=call.parameters,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost,
        )], ignore_conflicts=True)
    return True


def _answer_text(response):
    """(text, None) of a chat completion, or (None, why it is no answer)."""
    try:
        choice = response["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        return None, "Malformed response: it has no choices[0].message, so no answer was stored."
    text = (message.get("content") or message.get("refusal") or "").strip()
    if not text:
        return None, (f"The answer was empty (finish_reason {choice.get('finish_reason')!r}); "
                      "a larger max_tokens may help.")
    return text, None


def _record_failure(endpoint, call, error):
    """Record why the call failed; True when a later attempt may succeed (it stays owed)."""
    # A refused address is refused again until the researcher fixes the URL or an operator allows it.
    transient = isinstance(error, llm.TRANSIENT_ERRORS) and not outbound.refusal(error)
    EndpointCall.objects.filter(pk=call.pk).update(
        status=EndpointCall.Status.PENDING if transient else EndpointCall.Status.FAILED,
        error=_explain(endpoint, error))
    return transient


def _explain(endpoint, error):
    where = endpoint.base_url
    refused = outbound.refusal(error)
    if refused:
        return f"Refused: {refused}"
    if isinstance(error, openai.AuthenticationError):
        return (f"401 from {where}: the key in {endpoint.api_key_env} was refused ({_message(error)}).")
    if isinstance(error, openai.PermissionDeniedError):
        return f"403 from {where}: the key in {endpoint.api_key_env} may not use {endpoint.model} ({_message(error)})."
    if isinstance(error, openai.RateLimitError):
        return f"429 from {where}: rate limited after the client's retries ({_message(error)}); retried later."
    if isinstance(error, openai.InternalServerError):
        return f"{error.status_code} from {where}: the server failed ({_message(error)}); retried later."
    if isinstance(error, (openai.APIConnectionError, openai.APITimeoutError)):
        return f"No answer from {where} ({type(error).__name__}); retried later."
    if isinstance(error, openai.APIStatusError):
        return f"{error.status_code} from {where}: {_message(error)}."
    return f"Malformed response from {where}: {type(error).__name__}: {error}."


def _message(error):
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        return str(body.get("message") or body.get("error", {}).get("message") or error)
    return str(error)


# --- here and now (the command and tests) --------------------------------------------------------


def generate_answers(*, tournament):
    """Every endpoint model's owed answers, generated here chunk by chunk (the command and tests;
    the admin queues the same steps as jobs). Returns the number of answers stored."""
    _prepare(tournament)
    stored = 0
    for endpoint_id, first, last in plan_generation(tournament=tournament):
        stored += answer_chunk(endpoint=ModelEndpoint(pk=endpoint_id), first=first, last=last)
    return stored
