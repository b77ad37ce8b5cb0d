"""Every setting read from the environment has its row on the configuration page (docs/configuration.md),
and every row there names a variable something reads."""

import ast
import re

from tests.paths import PROJECT

SETTINGS = PROJECT / "crowdbench" / "settings.py"
CONFIGURATION = PROJECT / "docs" / "configuration.md"
# A row of one of the page's tables: "| `NAME` | default | meaning |".
_ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]+)` \|(.+)\|(.+)\|\s*$", re.MULTILINE)
# Where the variables read outside the settings module are read (the page's last table says which).
_READERS = ("Makefile", "scripts", "fixtures", "tests/paths.py", "annotation", "docker")


def environment_reads(source):
    """The names the settings module reads: django-environ's `env("X")`, `env.int("X")`, ... and
    `os.environ["X"]`, `os.environ.get("X")`, `os.getenv("X")`, whatever the layout of the call."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            function = node.func
            is_env = (isinstance(function, ast.Name) and function.id == "env") or (
                isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name)
                and function.value.id == "env")
            is_os = isinstance(function, ast.Attribute) and (
                ast.unparse(function) in ("os.getenv", "os.environ.get"))
            if (is_env or is_os) and node.args and isinstance(node.args[0], ast.Constant):
                names.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            if isinstance(node.slice, ast.Constant):
                names.add(node.slice.value)
    return names


def documented_rows():
    return {name: (default.strip(), meaning.strip())
            for name, default, meaning in _ROW.findall(CONFIGURATION.read_text())}


def test_the_parser_finds_every_way_settings_read_the_environment():
    source = ('A = env("ONE")\nB = env.list(\n    "TWO", default=[])\nC = os.environ["THREE"]\n'
              'D = os.environ.get("FOUR")\nE = os.getenv("FIVE")\nF = other("SIX")\n')
    assert environment_reads(source) == {"ONE", "TWO", "THREE", "FOUR", "FIVE"}


def test_every_environment_setting_has_a_row_on_the_configuration_page():
    names = environment_reads(SETTINGS.read_text())
    assert len(names) > 80
    rows = documented_rows()
    assert sorted(names - set(rows)) == []
    assert [name for name in names if not all(rows[name])] == []


def test_every_row_on_the_configuration_page_names_a_variable_something_reads():
    read_in_settings = environment_reads(SETTINGS.read_text())
    elsewhere = "\n".join(
        path.read_text(errors="replace")
        for reader in _READERS
        for path in ([PROJECT / reader] if (PROJECT / reader).is_file()
                     else (PROJECT / reader).rglob("*"))
        if path.is_file() and path.suffix in ("", ".py", ".sh", ".yaml", ".example")
    )
    unread = [name for name in documented_rows()
              if name not in read_in_settings and not re.search(rf"\b{name}\b", elsewhere)]
    assert unread == []
