"""The README and the documentation site (docs/*.md) name only what exists: Python names, files,
`manage.py` commands, site addresses, every exported column, and the README's links into the site.
`mkdocs build --strict` (make docs) checks the links between the site's own pages."""

import importlib
import re
from urllib.parse import unquote

from django.core.management import get_commands
from django.urls import Resolver404, resolve
from markdown.extensions.toc import slugify

from tests.paths import PROJECT

PAGES = {path.relative_to(PROJECT).as_posix(): path.read_text()
         for path in [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md"))]}
PACKAGES = ("annotation", "crowdbench", "frontend", "mturk", "tasks", "fixtures")
_CODE = re.compile(r"`([^`\n]+)`")


def code_spans():
    return {(page, span) for page, text in PAGES.items() for span in _CODE.findall(text)}


def test_the_site_has_its_pages():
    assert set(PAGES) >= {"README.md", "docs/index.md", "docs/researcher-guide.md", "docs/annotator-guide.md",
                          "docs/configuration.md", "docs/api.md", "docs/operations.md",
                          "docs/integrations.md", "docs/security.md", "docs/data-formats.md",
                          "docs/development.md"}


def test_every_python_name_the_docs_give_exists():
    """A dotted name in backticks that starts in one of our packages is a module attribute or a
    Celery task's name (`tasks.requeue_owed`); the README once sent readers to `tasks.jobs.enqueue`,
    which is `crowdbench.jobs.enqueue`."""
    from crowdbench.celery import app

    app.loader.import_default_modules()
    names = sorted({(page, span) for page, span in code_spans()
                    if re.fullmatch(r"[a-z_]+(?:\.[a-z_]+)+", span) and span.split(".")[0] in PACKAGES})
    assert ("docs/operations.md", "crowdbench.jobs.enqueue") in names

    def exists(name):
        if name in app.tasks:
            return True
        module, _, attribute = name.rpartition(".")
        try:
            return hasattr(importlib.import_module(module), attribute)
        except ImportError:
            return False

    assert [(page, name) for page, name in names if not exists(name)] == []


def test_every_file_the_docs_name_exists():
    top = ("crowdbench", "annotation", "mturk", "tasks", "frontend", "fixtures", "tests", "benchmarks",
           "docker", "scripts", "docs", ".ci")
    named = sorted({(page, span.rstrip("/")) for page, span in code_spans()
                    if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", span)
                    and (span.split("/")[0] in top and "/" in span
                         or span in ("manage.py", "pyproject.toml", "Makefile", "mkdocs.yml"))})
    assert len(named) > 40
    assert [(page, path) for page, path in named if not (PROJECT / path).exists()] == []


def test_every_manage_py_command_the_docs_name_exists():
    commands = {(page, name) for page, text in PAGES.items()
                for name in re.findall(r"manage\.py ([a-z][a-z0-9_]+)", text)}
    listing = PAGES["docs/researcher-guide.md"].split("## Command line", 1)[1].split("```sh\n", 1)[1]
    commands |= {("docs/researcher-guide.md", line.split()[0])
                 for line in listing.split("```", 1)[0].splitlines() if line.strip()}
    assert len(commands) > 10
    known = get_commands()
    assert sorted((page, name) for page, name in commands if name not in known) == []


def test_every_site_address_the_docs_give_is_served():
    examples = {"<id>": "1", "<unit id>": "1", "<version>": "1", "<name>": "manifest.json",
                "<stage>": "caption"}
    addresses = sorted({(page, span) for page, span in code_spans()
                        if re.match(r"/(admin|api|work|dashboard|health)/", span)})
    assert len(addresses) > 15
    unserved = []
    for page, address in addresses:
        path = re.sub(r"<[^>]+>", lambda m: examples[m.group(0)], address.split("?", 1)[0])
        try:
            resolve(path)
        except Resolver404:
            unserved.append((page, address))
    assert unserved == []


def test_every_exported_column_is_on_the_data_formats_page():
    from annotation.datasets.manifest import OUTPUTS

    page = PAGES["docs/data-formats.md"]
    missing = [(output.table.name, column) for output in OUTPUTS for column in output.table.header
               if f"| `{column}` |" not in page]
    assert missing == []
    assert [name for output in OUTPUTS for name in output.names().values() if f"`{name}`" not in page] == []


def test_the_readme_links_reach_pages_and_headings_that_exist():
    links = re.findall(r"\]\(((?:docs/)[^)#\s]+)(?:#([^)\s]+))?\)", PAGES["README.md"])
    assert len(links) > 8
    broken = []
    for target, anchor in links:
        path = PROJECT / unquote(target)
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", path.read_text(), re.MULTILINE)
            if anchor not in {slugify(heading, "-") for heading in headings}:
                broken.append(f"{target}#{anchor}")
    assert broken == []
