"""The code's layers point one way, and no module reaches itself through its imports.

Every import counts, function-level ones included, with relative imports resolved: an import
hidden inside a function still ties the two modules together. Layers, from the bottom:

0. infrastructure (`crowdbench/` but its URL map and WSGI entry): settings, the Celery app and the
   one seam jobs go out through (`crowdbench/jobs.py`), middleware, health checks;
1. the domain (`annotation/`), which names background jobs by their Celery name and never
   imports the jobs themselves;
2. the crowd platforms (`mturk/`), built on the domain's workers and work units;
3. the background jobs (`tasks/`): load a row by id, call one function of layers 1-2; and the
   consumers of the events the domain emits through `crowdbench/events.py` (`webhooks/`);
4. the edges, where a person or a program comes in: the admin, the API, management commands,
   template tags and the pages (`frontend/`); they may call anything below them;
5. the URL map and the WSGI entry, which assemble everything.

A module may import its own layer or a lower one. Circles are forbidden in any layer.
"""

import ast
from collections import defaultdict

import networkx as nx

from tests.paths import PROJECT

ROOT = PROJECT
PACKAGES = ("crowdbench", "annotation", "mturk", "tasks", "frontend", "webhooks")
EDGE_PARTS = ("admin", "api", "management", "templatetags")



def layer(module):
    top, *rest = module.split(".")
    if module in ("crowdbench.urls", "crowdbench.wsgi"):
        return 5
    if top == "frontend" or (rest and rest[0] in EDGE_PARTS):
        return 4
    return {"crowdbench": 0, "annotation": 1, "mturk": 2, "tasks": 3, "webhooks": 3}[top]


def modules():
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT).with_suffix("")
            if "migrations" in relative.parts:
                continue
            name = ".".join(relative.parts)
            found[name.removesuffix(".__init__")] = path
    return found


def import_graph():
    known = modules()

    def resolve(name):
        # "annotation.models.Worker" is the module annotation.models; stop at the first known one.
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    graph = defaultdict(set)
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [resolve(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                # `from annotation import judging` imports the module annotation.judging;
                # `from annotation.models import Worker` the module annotation.models.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else resolve(base)
                           for alias in node.names]
            else:
                continue
            graph[module].update(target for target in targets if target and target != module)
    return graph


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "crowdbench.celery" in graph["crowdbench.jobs"]
    assert {"annotation.models", "annotation.exceptions"} <= graph["annotation.crowdwork.queue"]
    assert len(graph) > 80


def test_no_module_reaches_itself_through_its_imports():
    graph = nx.DiGraph([(module, target) for module, targets in import_graph().items() for target in targets])
    circles = sorted(sorted(component) for component in nx.strongly_connected_components(graph)
                     if len(component) > 1)
    assert circles == []


def test_imports_point_down_the_layers():
    upward = {(module, target) for module, targets in import_graph().items() for target in targets
              if layer(target) > layer(module)}
    assert sorted(upward) == []


# What may reach the shared cache only through crowdbench/shared_cache.py, whose callers survive
# the cache's outage (issue 38): the cache itself, per-view caching and the rate limiter's counts.
CACHE_IMPORTS = ("django.core.cache", "django.views.decorators.cache", "django_ratelimit.decorators",
                 "django_ratelimit.core.is_ratelimited", "django_ratelimit.core.get_usage")


def _external_imports(path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_the_shared_cache_is_reached_only_through_its_one_door():
    reaching = sorted(
        (module, name) for module, path in modules().items() if module != "crowdbench.shared_cache"
        for name in _external_imports(path) if name in CACHE_IMPORTS)
    assert reaching == []
    shared = set(_external_imports(modules()["crowdbench.shared_cache"]))
    assert {"django.core.cache", "django_ratelimit.core.is_ratelimited"} <= shared


def _imports_of(prefix, *, into):
    return sorted((module, target) for module, targets in import_graph().items()
                  if module == prefix or module.startswith(f"{prefix}.")
                  for target in targets if any(target == name or target.startswith(f"{name}.") for name in into))


def test_preferences_import_nothing_of_collection():
    """Collection and preferences are two steps of the data flow; the units, queue and submit every
    stage shares are crowd work's (annotation/crowdwork/, issue 40), so neither needs the other."""
    assert _imports_of("annotation.preferences", into=("annotation.collection",)) == []
    assert _imports_of("annotation.collection", into=("annotation.preferences",)) == []


# Where every stage's answers meet: what they decide asked again (by stage), a stage's changed
# settings and review. The rest of crowd work is below the stages it serves.
CROWDWORK_MEETING_STAGES = {"annotation.crowdwork.decisions", "annotation.crowdwork.configs",
                            "annotation.crowdwork.review"}


def test_crowd_work_is_below_the_stages_it_serves():
    reaching = [(module, target) for module, target in
                _imports_of("annotation.crowdwork", into=("annotation.collection", "annotation.preferences"))
                if module not in CROWDWORK_MEETING_STAGES]
    assert reaching == []
    assert len([module for module in import_graph() if module.startswith("annotation.crowdwork.")]) > 10


# A crowd platform is known in its own backend, mturk/platforms/<platform>.py, and nowhere else:
# fees, identity checks, blocks, study defaults and the words its workers are told are the
# backend's (issue 40). Naming one elsewhere, by its enum member or by its value compared or
# passed as a platform, is what made adding a platform touch a dozen files. In-house and imported
# work are no crowd platform (Worker.IN_HOUSE) and may be named anywhere.
def _crowd_platforms():
    from annotation.models import Worker

    return {member.name: member.value for member in Worker.Platform if member not in Worker.IN_HOUSE}


def _platforms_named(path, crowd):
    values = set(crowd.values())
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in crowd and (
                (isinstance(node.value, ast.Attribute) and node.value.attr == "Platform")
                or (isinstance(node.value, ast.Name) and node.value.id == "Platform")):
            yield node.lineno, crowd[node.attr]
        elif isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                elements = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                yield from ((node.lineno, e.value) for e in elements
                            if isinstance(e, ast.Constant) and e.value in values)
        elif isinstance(node, ast.keyword) and (node.arg or "").endswith("platform") and (
                isinstance(node.value, ast.Constant) and node.value.value in values):
            yield node.lineno, node.value.value


def test_a_crowd_platform_is_named_only_in_its_own_backend():
    crowd = _crowd_platforms()
    named = [(module, line, platform) for module, path in modules().items()
             for line, platform in _platforms_named(path, crowd)]
    # The check sees each backend naming its own platform, so it would see anyone else doing it.
    assert {(module, platform) for module, _, platform in named} >= {
        (f"mturk.platforms.{platform}", platform) for platform in crowd.values()}
    elsewhere = sorted((module, line, platform) for module, line, platform in named
                       if module != f"mturk.platforms.{platform}")
    assert elsewhere == []
