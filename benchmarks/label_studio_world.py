"""Seeds Label Studio's own database, through Label Studio's own Django models, with a project the
size of the campaign-sized world's caption stage; run by benchmarks/label_studio_next.py with
Label Studio's Python, never ours:

    /tmp/ls-venv/bin/python benchmarks/label_studio_world.py --tasks 100000 --labeled 95000 \\
        --annotators 200

Label Studio's settings come from the environment label_studio_next.py sets (its PostgreSQL
database, DEBUG off). It makes an organisation with legacy API tokens on (what a script that
drives the API uses), `--annotators` members with their tokens, and one project whose tasks are
an image URL and an instruction, captioned in a text area, one annotation each (Label Studio's
"maximum annotations" 1, sequential sampling: its default). The first `--labeled` tasks already
carry an annotation by one of 1,000 earlier annotators, as the world's done caption units carry
theirs, so the next task is looked for past them. Tasks and annotations are bulk inserted with
the counters Label Studio's importer and annotation signals keep (`is_labeled`,
`total_annotations`); the 200 annotators are made as its signup does (a user, its token, its
membership). It prints one JSON line: the project's id, the annotators' tokens and how many
queries one next-task request makes (counted in-process). `--existing` seeds nothing and prints the
same line for the project an earlier run seeded (its unannotated tasks are fewer by what the runs
since annotated).
"""

import argparse
import json
import os
import random
import sys
from pathlib import Path

LABEL_CONFIG = """<View>
  <Image name="image" value="$image"/>
  <Text name="instruction" value="$instruction"/>
  <TextArea name="caption" toName="image" maxSubmissions="1" rows="4"/>
</View>"""
EARLIER_ANNOTATORS = 1000
BATCH = 10_000


def set_up_label_studio():
    import label_studio

    # Label Studio's modules import each other as top-level packages (`core`, `tasks`), as its manage.py arranges.
    sys.path.insert(0, str(Path(label_studio.__file__).parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings.label_studio")
    import django

    django.setup()


def seed(*, tasks, labeled, annotators, seed_number):
    from django.contrib.auth.hashers import make_password
    from django.db import connection, transaction
    from organizations.models import Organization, OrganizationMember
    from projects.models import Project
    from rest_framework.authtoken.models import Token
    from users.models import User

    from tasks.models import Annotation, Task

    rng = random.Random(seed_number)
    admin = User.objects.create_superuser(email="admin@bench.example", password="bench-admin-password")
    organisation = Organization.create_organization(created_by=admin, title="Bench", legacy_api_tokens_enabled=True)
    admin.active_organization = organisation
    admin.save(update_fields=["active_organization"])

    tokens = []
    for n in range(annotators):
        user = User.objects.create_user(email=f"annotator{n:03d}@bench.example", password=None)
        organisation.add_user(user)
        user.active_organization = organisation
        user.save(update_fields=["active_organization"])
        tokens.append(Token.objects.get_or_create(user=user)[0].key)
    unusable = make_password(None)
    earlier = User.objects.bulk_create([
        User(email=f"earlier{n:04d}@bench.example", username=f"earlier{n:04d}", password=unusable,
             active_organization=organisation)
        for n in range(EARLIER_ANNOTATORS)])
    OrganizationMember.objects.bulk_create([OrganizationMember(user=user, organization=organisation)
                                            for user in earlier])

    project = Project.objects.create(title="Bench captions", organization=organisation, created_by=admin,
                                     label_config=LABEL_CONFIG, maximum_annotations=1,
                                     sampling=Project.SEQUENCE)
    with transaction.atomic():
        made = Task.objects.bulk_create([
            Task(project=project, inner_id=n + 1, overlap=1, is_labeled=n < labeled,
                 total_annotations=1 if n < labeled else 0,
                 data={"image": f"https://upload.wikimedia.org/bench/{n}.jpg",
                       "instruction": f"Instruction {n}: what does the picture show?"})
            for n in range(tasks)], batch_size=BATCH)
        Annotation.objects.bulk_create([
            Annotation(task=task, project=project, completed_by=rng.choice(earlier), lead_time=rng.uniform(60, 400),
                       result_count=1, bulk_created=True,
                       result=[{"from_name": "caption", "to_name": "image", "type": "textarea",
                                "value": {"text": [f"A photograph for task {task.pk}, described in detail."]}}])
            for task in made[:labeled]], batch_size=BATCH)
    # The next-task query filters and orders on these columns: the planner needs to know their sizes, as
    # autovacuum would have told it on a server that ran the import (this machine's runs with it off).
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return project.pk, tokens


def existing(annotators):
    """The project and the first `annotators` tokens a run before seeded, in the order it made them."""
    from projects.models import Project
    from rest_framework.authtoken.models import Token

    project = Project.objects.get(title="Bench captions")
    tokens = dict(Token.objects.filter(user__email__startswith="annotator").values_list("user__email", "key"))
    return project.pk, [tokens[f"annotator{n:03d}@bench.example"] for n in range(annotators)]


def queries_of_next_task(project):
    """How many queries Label Studio's next-task request makes, asked by the project's owner in-process
    (the task it locks for them is one the annotators then skip, as they would on a live server)."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.authtoken.models import Token

    token = Token.objects.get(user__email="admin@bench.example").key
    with CaptureQueriesContext(connection) as next_task:
        answer = Client(HTTP_AUTHORIZATION=f"Token {token}").get(f"/api/projects/{project}/next")
    if answer.status_code != 200:
        raise RuntimeError(f"next task: {answer.status_code} {answer.content[:200]!r}")
    return len(next_task)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--labeled", type=int, default=95_000, help="tasks that already have their annotation")
    parser.add_argument("--annotators", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--existing", action="store_true",
                        help="seed nothing: describe the project an earlier run seeded")
    args = parser.parse_args()
    set_up_label_studio()
    if args.existing:
        project, tokens = existing(args.annotators)
    else:
        project, tokens = seed(tasks=args.tasks, labeled=min(args.labeled, args.tasks), annotators=args.annotators,
                               seed_number=args.seed)
    print(json.dumps({"project": project, "tokens": tokens, "next_task_queries": queries_of_next_task(project)}))


if __name__ == "__main__":
    main()
