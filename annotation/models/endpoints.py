"""Models a tournament asks for answers itself: an OpenAI-compatible endpoint per model, and the
call that each (endpoint, instance) answer is paid through."""

import re
import uuid
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from annotation.model_checks import StorableJSONField
from annotation.models.instances import Instance
from annotation.models.preferences import REFERENCE_MODEL_NAME, Tournament
from crowdbench.outbound import PublicAddressValidator

# The name of an environment variable, as shells and docker compose write them.
ENV_VAR_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")

# The generation parameters an endpoint may be given, with the check each value must pass. Only
# these reach the request: a typo ("temprature") or a parameter that changes what an answer is
# (n, stream, tools) is refused before it costs a run.
_NUMBER = (int, float)


def _between(low, high):
    return lambda value: isinstance(value, _NUMBER) and not isinstance(value, bool) and low <= value <= high


def _positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _stop(value):
    return (isinstance(value, str) and value != "") or (
        isinstance(value, list) and 1 <= len(value) <= 4 and all(isinstance(s, str) and s for s in value))


GENERATION_PARAMETERS = {
    "temperature": (_between(0, 2), "a number from 0 to 2"),
    "top_p": (_between(0, 1), "a number from 0 to 1"),
    "max_tokens": (_positive_int, "a whole number of at least 1"),
    "max_completion_tokens": (_positive_int, "a whole number of at least 1"),
    "presence_penalty": (_between(-2, 2), "a number from -2 to 2"),
    "frequency_penalty": (_between(-2, 2), "a number from -2 to 2"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "stop": (_stop, "a string or a list of up to 4 strings"),
}


def parameter_problems(parameters):
    """What is wrong with a generation parameters object, one line each; empty when it is sound."""
    if not isinstance(parameters, dict):
        return ["must be a JSON object, e.g. {\"temperature\": 0.2, \"max_tokens\": 512}"]
    problems = []
    for name, value in parameters.items():
        if name not in GENERATION_PARAMETERS:
            problems.append(f"“{name}” is not a generation parameter this platform sends; use "
                            + ", ".join(GENERATION_PARAMETERS))
            continue
        check, shape = GENERATION_PARAMETERS[name]
        if not check(value):
            problems.append(f"“{name}” must be {shape}, not {value!r}")
    return problems


def base_url_problem(url):
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL of an OpenAI-compatible API, e.g. https://api.openai.com/v1"
    if parts.username or parts.password:
        return "must not hold credentials: name the key's environment variable instead"
    if parts.query or parts.fragment:
        return "must not have a query or fragment"
    return None


def key_variable_refused(name):
    """Why an endpoint model may not name the environment variable `name` for its key, or None."""
    allowed = settings.ENDPOINT_MODEL_KEY_VARIABLES
    if name in allowed:
        return None
    return (f"{name} is not a variable endpoint models may read: its value is sent to the endpoint's address, so "
            "the operator names the variables that hold endpoint keys (ENDPOINT_MODEL_KEY_VARIABLES: "
            f"{', '.join(allowed) or 'none yet'}). Ask them to add the one holding your key.")


class ModelEndpoint(models.Model):
    """A contestant whose answers the platform asks for, from an OpenAI-compatible endpoint.

    The key is never stored: `api_key_env` names the environment variable the worker reads it from.
    """

    tournament = models.ForeignKey(Tournament, on_delete=models.CASCADE, related_name="endpoint_models")
    model_name = models.CharField(
        max_length=200, help_text="The model's name on the leaderboard and in the exports.")
    base_url = models.URLField(max_length=500, validators=[PublicAddressValidator("ENDPOINT_MODEL_ALLOWED_NETWORKS")],
                               help_text="e.g. https://api.openai.com/v1 or a vLLM server's /v1.")
    model = models.CharField(max_length=200, help_text="The model as the endpoint names it, e.g. gpt-4o.")
    api_key_env = models.CharField(
        max_length=128, verbose_name="API key environment variable",
        help_text="The NAME of the environment variable holding the key (e.g. OPENAI_API_KEY), "
                  "set for the web server and the worker; never the key itself.")
    parameters = StorableJSONField(
        default=dict, blank=True,
        help_text='Generation parameters sent with every request, e.g. {"temperature": 0.2, "max_tokens": 512}.')
    input_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, default=Decimal(0), validators=[MinValueValidator(0)],
        help_text="USD per million input (prompt) tokens, for the cost.")
    output_price_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, default=Decimal(0), validators=[MinValueValidator(0)],
        help_text="USD per million output (completion) tokens, for the cost.")
    concurrency = models.PositiveSmallIntegerField(default=4, validators=[MinValueValidator(1)],
                                                   help_text="How many of its calls are in flight at once.")
    # The last failure of its generation job, shown on the workflow page; cleared by the next run.
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tournament_id", "model_name"]
        constraints = [
            models.UniqueConstraint(fields=["tournament", "model_name"], name="endpoint_model_name_unique"),
        ]

    def __str__(self):
        return f"{self.model_name} ({self.model} at {self.base_url})"

    def clean(self):
        errors = {}
        problem = base_url_problem(self.base_url)
        if problem:
            errors["base_url"] = f"The base URL {problem}."
        if not ENV_VAR_NAME.match(self.api_key_env or ""):
            errors["api_key_env"] = ("Give the NAME of an environment variable (capital letters, digits "
                                     "and underscores, e.g. VLLM_API_KEY), not the key itself.")
        elif refused := key_variable_refused(self.api_key_env):
            errors["api_key_env"] = refused
        problems = parameter_problems(self.parameters)
        if problems:
            errors["parameters"] = "; ".join(problems) + "."
        if self.model_name.strip() == REFERENCE_MODEL_NAME:
            errors["model_name"] = f"“{REFERENCE_MODEL_NAME}” is the verified reference's name."
        if errors:
            raise ValidationError(errors)

    @property
    def origin(self):
        """Where the answers came from, for the record: the server and model, never a key."""
        return f"{self.model} at {self.base_url}"


def new_idempotency_key():
    return uuid.uuid4().hex


class EndpointCall(models.Model):
    """The one paid call for an endpoint's answer to an instance, recorded before it is sent.

    Its row is the lock (one per endpoint and instance), and its idempotency key goes out with every
    attempt, so a retry after a kill whose outcome is unknown is the same request to a server that
    honours the key, never a second one with a new identity.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending: not sent yet"
        # On the wire: a worker killed now leaves the outcome unknown; the next attempt re-sends it
        # with the same idempotency key.
        SENT = "sent", "Sent: awaiting the answer"
        ANSWERED = "answered", "Answered"
        FAILED = "failed", "Failed"

    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.CASCADE, related_name="calls")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="endpoint_calls")
    idempotency_key = models.CharField(max_length=64, unique=True, default=new_idempotency_key)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    parameters = StorableJSONField(default=dict, blank=True)
    response = StorableJSONField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["endpoint_id", "instance_id"]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "instance"], name="endpoint_call_once_per_instance"),
        ]

    def __str__(self):
        return f"{self.endpoint.model_name} on #{self.instance_id} ({self.status})"
