"""`manage.py push_snapshot [version]`: publish a built snapshot as a Hugging Face dataset."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation.datasets.hub import push_snapshot
from annotation.exceptions import AnnotationError
from annotation.models import Snapshot


class Command(BaseCommand):
    help = ("Push a done snapshot (default: the latest) to a Hugging Face dataset repository, creating it "
            "if needed. The token comes from HUGGINGFACE_TOKEN; the repository from --repo or "
            "HUGGINGFACE_DATASET_REPO; the Hub's address from HUGGINGFACE_ENDPOINT.")

    def add_arguments(self, parser):
        parser.add_argument("version", type=int, nargs="?", help="The snapshot (default: the latest done).")
        parser.add_argument("--repo", default="", help="owner/name of the dataset repository.")
        visibility = parser.add_mutually_exclusive_group()
        visibility.add_argument("--private", action="store_true", default=None,
                                help="Create the repository private (default: HUGGINGFACE_PRIVATE).")
        visibility.add_argument("--public", action="store_false", dest="private",
                                help="Create the repository public.")

    def handle(self, *args, version, repo, private, **options):
        done = Snapshot.objects.filter(status=Snapshot.Status.DONE)
        snapshot = done.filter(version=version).first() if version else done.order_by("-version").first()
        if snapshot is None:
            raise CommandError("No done snapshot " + (f"v{version}." if version else "yet."))
        try:
            pushed = push_snapshot(snapshot=snapshot, repo_id=repo or settings.HUGGINGFACE_DATASET_REPO,
                                   token=settings.HUGGINGFACE_TOKEN, private=private)
        except AnnotationError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"{snapshot}: {len(pushed.files)} files pushed to {pushed.repo_url}")
        self.stdout.write(f"  commit {pushed.commit_url}")
