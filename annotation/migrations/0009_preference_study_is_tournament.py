"""A preference study is a tournament in code, so that "study" means one thing: work posted on a
crowd platform (mturk.CrowdStudy). The rows stay as they are; tables and columns follow the names."""

from django.db import migrations, models

PERMISSION_ACTIONS = ("add", "change", "delete", "view")

CONSTRAINTS_ON_TOURNAMENT = [
    ("battle", models.UniqueConstraint(fields=("tournament", "response_a", "response_b"),
                                       name="battle_pair_unique")),
    ("leaderboardresult", models.UniqueConstraint(fields=("tournament", "criterion", "rounds", "data_key"),
                                                  name="leaderboard_result_unique_per_data")),
    ("rubric", models.UniqueConstraint(fields=("tournament", "family"), name="rubric_family_unique")),
    ("rubric", models.UniqueConstraint(fields=("tournament", "instance"), name="rubric_instance_unique")),
]


def rename_permissions(apps, schema_editor, old, new, old_label, new_label):
    """Django renames a model's content type but not its permissions' codenames, so groups given
    "view preference study" would lose it under the new name. Move each permission as it is."""
    Permission = apps.get_model("auth", "Permission")
    for action in PERMISSION_ACTIONS:
        stale = Permission.objects.filter(content_type__app_label="annotation", codename=f"{action}_{old}")
        for permission in stale:
            taken = Permission.objects.filter(content_type=permission.content_type,
                                              codename=f"{action}_{new}").first()
            if taken is not None:
                # post_migrate may already have made the new one: it takes the old one's holders.
                taken.group_set.add(*permission.group_set.all())
                taken.user_set.add(*permission.user_set.all())
                permission.delete()
                continue
            permission.codename = f"{action}_{new}"
            permission.name = f"Can {action} {new_label}"
            permission.save(update_fields=["codename", "name"])


def forwards(apps, schema_editor):
    rename_permissions(apps, schema_editor, "preferencestudy", "tournament", "preference study", "tournament")


def backwards(apps, schema_editor):
    rename_permissions(apps, schema_editor, "tournament", "preferencestudy", "tournament", "preference study")


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0008_work_unit_battle"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        # SQLite rebuilds a table to rename a column, from the recorded state, so a constraint that
        # still names the old field cannot survive the rename: it is dropped first and made again.
        *[migrations.RemoveConstraint(model_name=model_name, name=constraint.name)
          for model_name, constraint in CONSTRAINTS_ON_TOURNAMENT],
        migrations.RenameModel("PreferenceStudy", "Tournament"),
        migrations.AlterModelOptions(name="tournament",
                                     options={"ordering": ["-created_at"], "verbose_name_plural": "tournaments"}),
        migrations.AlterField(
            model_name="tournament", name="families",
            field=models.ManyToManyField(blank=True, help_text="None chosen: every family.",
                                         related_name="tournaments", to="annotation.instructionfamily"),
        ),
        migrations.RenameField("battle", "study", "tournament"),
        migrations.RenameField("rubric", "study", "tournament"),
        migrations.RenameField("judgerun", "study", "tournament"),
        migrations.RenameField("leaderboardresult", "study", "tournament"),
        migrations.RenameField("snapshot", "studies", "tournaments"),
        migrations.AlterField(
            model_name="snapshot", name="tournaments",
            field=models.ManyToManyField(blank=True, related_name="snapshots", to="annotation.tournament",
                                         help_text="Tournaments whose judgements go in; none: no judgements."),
        ),
        *[migrations.AddConstraint(model_name=model_name, constraint=constraint)
          for model_name, constraint in CONSTRAINTS_ON_TOURNAMENT],
        migrations.RunPython(forwards, backwards),
    ]
