"""Count what every kept count (Table 2's, the workflow pages') has marked, as the first reader would:
once after a migration that marks every instance (0039, 0041), so that no page pays for it."""

import time

from django.core.management.base import BaseCommand

from annotation.collection import kept_counts
from annotation.collection.table2_counts import TABLE2
from annotation.collection.workflow_counts import WORKFLOW


class Command(BaseCommand):
    help = "Count every instance the kept counts of Table 2 and of the workflow pages have marked."

    def handle(self, *args, **options):
        for counts in (TABLE2, WORKFLOW):
            started = time.perf_counter()
            marked = sorted(set(counts.model.objects.filter(stale=True).values_list("family_id", flat=True)))
            kept_counts.count_again(counts, marked)
            self.stdout.write(f"{counts.name}: {len(marked)} famil{'y' if len(marked) == 1 else 'ies'} counted "
                              f"in {time.perf_counter() - started:.1f} s")
