"""Make a research group, put a member in it with a role, or list the groups and their members."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation import teams
from annotation.exceptions import AnnotationError
from annotation.models import Membership, ResearchGroup


class Command(BaseCommand):
    help = ("Research groups own families, tournaments and snapshots; their members see and change only "
            "those, as their role allows (owner, researcher, reviewer, viewer).")

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="command", required=True)
        create = commands.add_parser("create", help="Make a group.")
        create.add_argument("name")
        add = commands.add_parser("add", help="Put a user in a group, or change their role there.")
        add.add_argument("group", help="The group's name.")
        add.add_argument("username")
        add.add_argument("--role", default=Membership.Role.RESEARCHER, choices=Membership.Role.values)
        commands.add_parser("list", help="Every group with its members and their roles.")

    def handle(self, *args, **options):
        try:
            if options["command"] == "create":
                group = teams.create_group(name=options["name"])
                self.stdout.write(f"Made the research group “{group}”.")
            elif options["command"] == "add":
                self._add(options["group"], options["username"], options["role"])
            else:
                self._list()
        except AnnotationError as error:
            raise CommandError(str(error)) from None

    def _add(self, group_name, username, role):
        group = ResearchGroup.objects.filter(name=group_name).first()
        if group is None:
            raise CommandError(f"No research group is called “{group_name}”; make it with `research_group create`.")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user is called “{username}”; make one with `createsuperuser` or in the admin.")
        teams.add_member(group=group, user=user, role=role)
        self.stdout.write(f"{username} is a {role} of “{group}”.")

    def _list(self):
        for group in ResearchGroup.objects.prefetch_related("memberships__user"):
            members = ", ".join(f"{m.user.get_username()} ({m.role})" for m in group.memberships.all())
            self.stdout.write(f"{group}: {members or 'no members'}")
