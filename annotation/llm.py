"""The one door to language models: an OpenAI-compatible client, what its tokens cost, which
of its failures a later attempt may not meet, and how an instance's images are sent.

References (paper §2.1), the judge (§4) and a tournament's endpoint models may be served by
different servers, so each reads its own settings (OPENAI_*, JUDGE_*, the endpoint's row), but
all are the same client with the same retries.
"""

import base64
import os
from decimal import Decimal
from functools import lru_cache

import openai
from django.conf import settings

from annotation.exceptions import AnnotationError
from annotation.models.endpoints import key_variable_refused
from crowdbench import outbound

REFERENCE_KEY_MISSING = (
    "OPENAI_REFERENCE_MODEL is set but OPENAI_API_KEY is not. Set OPENAI_API_KEY (any non-empty "
    "value for a local server that checks no key) and restart the web server and the worker."
)
JUDGE_KEY_MISSING = (
    "JUDGE_API_KEY (or OPENAI_API_KEY) is not set; the judge cannot call "
    "its model. Set any non-empty value for a local server."
)

# What a job may retry later: the model's rate limits and outages, once the client's own retries
# within the call are spent.
TRANSIENT_ERRORS = (
    openai.RateLimitError,
    openai.APIConnectionError,
    openai.APITimeoutError,
    openai.InternalServerError,
)

ONE_MILLION = Decimal(1_000_000)


def client(*, api_key, base_url, missing_key, allowed_networks_setting=None):
    """The client for the server at `base_url`; `missing_key` is the researcher's message when no
    key is set, raised before any request is made. With `allowed_networks_setting`, the client
    reaches public addresses and that setting's networks only (crowdbench/outbound.py): for a URL
    a researcher typed.

    A process keeps one client per server and never closes it: its connections stay open from one
    judge chunk (one job) to the next, where a client per chunk opened all of them again and left
    the run's calls waiting on the handshakes."""
    if not api_key:
        raise AnnotationError(missing_key)
    # Keyed by process too: a forked Celery or gunicorn child must not share its parent's sockets.
    return _client(api_key, base_url, settings.OPENAI_MAX_RETRIES, settings.OPENAI_TIMEOUT_SECONDS, os.getpid(),
                   allowed_networks_setting)


@lru_cache(maxsize=8)
def _client(api_key, base_url, max_retries, timeout, process_id, allowed_networks_setting):
    # The client retries rate limits and server errors itself, honouring retry-after, with backoff.
    http_client = (outbound.client(setting=allowed_networks_setting, timeout=timeout)
                   if allowed_networks_setting else None)
    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout,
                         http_client=http_client)


def reference_model_configured():
    return bool(settings.OPENAI_REFERENCE_MODEL)


def reference_client():
    return client(api_key=settings.OPENAI_API_KEY, base_url=settings.OPENAI_BASE_URL,
                  missing_key=REFERENCE_KEY_MISSING)


def judge_client():
    return client(api_key=settings.JUDGE_API_KEY, base_url=settings.JUDGE_BASE_URL,
                  missing_key=JUDGE_KEY_MISSING)


def endpoint_client(endpoint):
    """The client for a tournament's endpoint model (annotation/models/endpoints.py), its key read
    from the environment variable the endpoint names, when the operator lets endpoints read it."""
    return client(
        api_key=_endpoint_key(endpoint), base_url=endpoint.base_url,
        missing_key=endpoint_key_missing(endpoint), allowed_networks_setting="ENDPOINT_MODEL_ALLOWED_NETWORKS",
    )


def _endpoint_key(endpoint):
    # Read only where allowed, so a row saved before the rule sends nothing either.
    return "" if key_variable_refused(endpoint.api_key_env) else os.environ.get(endpoint.api_key_env, "")


def endpoint_key_missing(endpoint):
    """The researcher's message when an endpoint's key is not set, or may not be read; None when it is."""
    refused = key_variable_refused(endpoint.api_key_env)
    if refused:
        return f"{endpoint.model_name}: {refused}"
    if _endpoint_key(endpoint):
        return None
    return (
        f"{endpoint.model_name}: the environment variable {endpoint.api_key_env} that should hold "
        f"the key of {endpoint.base_url} is not set. Set it (any non-empty value for a local "
        "server that checks no key) for the web server and the worker, and restart them."
    )


def cost_usd(*, model, prompt_tokens, completion_tokens, via_batch=False):
    """Cost from OPENAI_PRICES (USD per million tokens), times JUDGE_BATCH_PRICE_FACTOR for the
    Batch API; None when the model or usage is unknown."""
    price = settings.OPENAI_PRICES.get(model)
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    cost = priced(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, prices=price)
    if via_batch:
        cost *= Decimal(str(settings.JUDGE_BATCH_PRICE_FACTOR))
    return cost


def priced(*, prompt_tokens, completion_tokens, prices):
    """USD for the tokens at `prices` (input, output), each USD per million tokens."""
    input_price, output_price = (Decimal(str(p)) for p in prices)
    cost = (prompt_tokens * input_price + completion_tokens * output_price) / ONE_MILLION
    return cost.quantize(Decimal("0.000001"))


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


def image_parts(instance):
    """The instance's images, in order, as the chat API's image content parts."""
    return [{"type": "image_url", "image_url": {"url": url}} for url in image_urls(instance)]
