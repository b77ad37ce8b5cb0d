"""Generate candidate references for every instance awaiting one (paper §2.1)."""

from decimal import Decimal

import openai
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from annotation.collection.captions import queue_reference_generation
from annotation.collection.references import NOT_CONFIGURED_MESSAGE, generate_reference
from annotation.exceptions import AnnotationError
from annotation.llm import reference_model_configured
from annotation.models import Instance, InstructionFamily


class Command(BaseCommand):
    help = "Generate candidate references for the instances awaiting one (now, or by the worker)."

    def add_arguments(self, parser):
        parser.add_argument("--family", metavar="NAME", help="Only this instruction family.")
        parser.add_argument("--async", dest="enqueue", action="store_true",
                            help="Enqueue one background job per instance instead of waiting.")

    def handle(self, *args, family=None, enqueue=False, **options):
        if not reference_model_configured():
            raise CommandError(NOT_CONFIGURED_MESSAGE)
        instances = Instance.objects.filter(status=Instance.Status.AWAITING_REFERENCE)
        if family is not None:
            if not InstructionFamily.objects.filter(name=family).exists():
                raise CommandError(f"No instruction family is named “{family}”.")
            instances = instances.filter(family__name=family)
        instances = instances.select_related("current_caption").order_by("id")

        if enqueue:
            count = 0
            for instance in instances:
                queue_reference_generation(instance_id=instance.pk)
                count += 1
            self.stdout.write(f"Enqueued {count} reference job(s); each records its own cost.")
            return

        started = timezone.now()
        total_cost = Decimal(0)
        made = failed = unpriced = 0
        for instance in instances:
            try:
                reference = generate_reference(instance=instance)
            except (AnnotationError, openai.APIError) as error:
                failed += 1
                self.stderr.write(f"Instance #{instance.pk}: failed: {error}")
                continue
            if reference is None:
                self.stdout.write(f"Instance #{instance.pk}: skipped, no longer awaiting one.")
            elif reference.created_at < started:
                self.stdout.write(f"Instance #{instance.pk}: reference #{reference.pk} existed.")
            else:
                made += 1
                if reference.cost_usd is None:
                    unpriced += 1
                    cost = "unknown cost: add the model to OPENAI_PRICES_JSON"
                else:
                    total_cost += reference.cost_usd
                    cost = f"${reference.cost_usd}"
                self.stdout.write(
                    f"Instance #{instance.pk}: reference #{reference.pk} from {reference.model} "
                    f"({reference.prompt_tokens} + {reference.completion_tokens} tokens, {cost})."
                )
        unpriced_note = f" ({unpriced} of unknown cost not included)" if unpriced else ""
        self.stdout.write(
            f"Generated {made} reference(s), {failed} failed; "
            f"total cost ${total_cost:.6f}{unpriced_note}."
        )
        if failed:
            raise CommandError(f"{failed} instance(s) got no reference; run again to retry them.")
