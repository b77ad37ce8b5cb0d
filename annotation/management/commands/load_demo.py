"""`manage.py load_demo`: the demo families `make run` shows (fixtures/demo.py)."""

import os

from django.core.management.base import BaseCommand, CommandError

from fixtures.demo import ADMIN_PASSWORD_ENV, ADMIN_USERNAME, DEFAULT_ADMIN_PASSWORD


class Command(BaseCommand):
    help = (
        "Load demo instruction families with real public-domain and CC0 photos, instances at every "
        f"stage, and a superuser '{ADMIN_USERNAME}' (password from {ADMIN_PASSWORD_ENV}, default "
        f"'{DEFAULT_ADMIN_PASSWORD}'). Running it again changes nothing."
    )

    def handle(self, *args, **options):
        try:
            from fixtures.loader import load_demo, skimage_data_dir

            skimage_data_dir()
        except ImportError as error:
            raise CommandError(
                f"The demo photos come from scikit-image ({error}); `make install` "
                "installs it (from requirements/run.txt)."
            ) from error
        password = os.environ.get(ADMIN_PASSWORD_ENV, DEFAULT_ADMIN_PASSWORD)
        created = load_demo(admin_password=password)
        if created:
            self.stdout.write(self.style.SUCCESS(f"Loaded demo families: {', '.join(created)}."))
        else:
            self.stdout.write("The demo is already loaded; nothing changed.")

