from django.conf import settings
from django.db import models


class ResearchGroup(models.Model):
    """A team that owns families, tournaments and snapshots: its members see and change only what
    it owns, each as their role allows (annotation/teams.py)."""

    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner: changes everything of the group and its members"
        RESEARCHER = "researcher", "Researcher: changes the group's families, tournaments and studies"
        REVIEWER = "reviewer", "Reviewer: sees everything of the group and reviews its answers"
        VIEWER = "viewer", "Viewer: sees everything of the group, changes nothing"

    group = models.ForeignKey(ResearchGroup, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="research_memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.RESEARCHER)

    class Meta:
        ordering = ["group", "user"]
        constraints = [models.UniqueConstraint(fields=["group", "user"], name="one_role_per_member")]

    def __str__(self):
        return f"{self.user} in {self.group} ({self.role})"
