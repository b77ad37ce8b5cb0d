"""Snapshots from the command line: `snapshot create`, `snapshot diff`, `snapshot list`."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.datasets import manifest, snapshots
from annotation.exceptions import AnnotationError
from annotation.models import Snapshot, Tournament


class Command(BaseCommand):
    help = "Create, list and diff versioned snapshots of the benchmark and its judgements."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="action", required=True)
        create = commands.add_parser("create", help="Freeze the benchmark and chosen tournaments.")
        create.add_argument("--tournament", action="append", default=[], dest="tournaments",
                            help="A tournament whose judgements go in (repeatable).")
        create.add_argument("--note", default="")
        create.add_argument("--user", help="Username recorded as the snapshot's creator.")
        create.add_argument("--background", action="store_true",
                            help="Queue the build for a worker instead of building here.")
        diff = commands.add_parser("diff", help="Instances added, removed and changed.")
        diff.add_argument("version", type=int, nargs="?",
                          help="The newer snapshot (default: the latest done).")
        diff.add_argument("--against", type=int, help="The older one (default: the previous).")
        diff.add_argument("--ids", action="store_true", help="List the instance ids.")
        commands.add_parser("list", help="Every snapshot, newest first.")

    def handle(self, *args, action, **options):
        try:
            getattr(self, f"_{action}")(**options)
        except AnnotationError as error:
            raise CommandError(str(error)) from None

    def _create(self, *, tournaments, note, user, background, **_):
        chosen = []
        for name in tournaments:
            tournament = Tournament.objects.filter(name=name).first()
            if tournament is None:
                raise CommandError(f"No tournament is called “{name}”.")
            chosen.append(tournament)
        creator = None
        if user:
            creator = get_user_model().objects.filter(username=user).first()
            if creator is None:
                raise CommandError(f"No user is called “{user}”.")
        snapshot = snapshots.request_snapshot(created_by=creator, tournaments=chosen, note=note,
                                              background=background)
        if background:
            self.stdout.write(f"{snapshot} queued.")
            return
        snapshot = snapshots.build_snapshot(snapshot=snapshot)
        self.stdout.write(f"{snapshot}: {snapshot.get_status_display()}, "
                          f"sha256 {snapshot.content_sha256}")
        for entry in snapshot.files:
            self.stdout.write(f"  {entry['path']}  {entry['rows']} rows  {entry['bytes']} bytes")

    def _diff(self, *, version, against, ids, **_):
        done = Snapshot.objects.filter(status=Snapshot.Status.DONE)
        new = done.filter(version=version).first() if version else done.order_by("-version").first()
        if new is None:
            raise CommandError("No done snapshot " + (f"v{version}." if version else "yet."))
        old = None
        if against is not None:
            old = done.filter(version=against).first()
            if old is None:
                raise CommandError(f"No done snapshot v{against}.")
        diff = manifest.diff_snapshots(new=new, old=old)
        self.stdout.write(diff.summary())
        if ids:
            for label in ("added", "removed", "changed"):
                values = getattr(diff, label)
                self.stdout.write(f"{label}: {' '.join(map(str, values)) or '-'}")

    def _list(self, **_):
        for snapshot in Snapshot.objects.order_by("-version"):
            self.stdout.write(f"v{snapshot.version}  {snapshot.status:8} {snapshot.progress:3}%  "
                              f"{snapshot.created_at:%Y-%m-%d %H:%M}  {snapshot.content_sha256[:12]}  "
                              f"{snapshot.note}")
