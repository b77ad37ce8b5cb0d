"""What the benchmarks share: a database of their own, and the web server run as in production."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit
from urllib.request import build_opener

ROOT = Path(__file__).resolve().parent.parent


def fresh_database(server_url, name):
    """Drop and create database `name` on the PostgreSQL server of `server_url`; its URL."""
    import psycopg

    parts = urlsplit(server_url)
    admin_url = urlunsplit((parts.scheme, parts.netloc, "/postgres", "", ""))
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", "", ""))


def copy_of_database(server_url, name, template, *, wait_seconds=0):
    """Drop database `name` and create it again as a copy of `template` (a seeded world, kept
    unchanged for the next benchmark); its URL. PostgreSQL copies only a database nobody is
    connected to: while somebody is (the seeding still running), it asks again every 10 s for up to
    `wait_seconds`, then gives up with the server's own message."""
    import psycopg

    parts = urlsplit(server_url)
    admin_url = urlunsplit((parts.scheme, parts.netloc, "/postgres", "", ""))
    deadline = time.monotonic() + wait_seconds
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        while True:
            try:
                connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
                break
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(10)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", "", ""))


def set_up_django(database_url):
    """Django on the benchmark's own database, migrated."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdbench.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from crowdbench import scoping

    scoping.enter(scoping.EveryGroup("a benchmark builds and reads every group's rows"))
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def analyse_as_autovacuum_would():
    """VACUUM ANALYZE the benchmark's database once it is filled, as autovacuum does after a bulk
    load on a production server (PostgreSQL 13 and later vacuum a table after many inserts, not
    only after updates). This machine's PostgreSQL runs with autovacuum off. Without statistics the
    planner takes thousands of seeded rows for a handful (for each next unit it then scanned every
    image asset instead of looking one up); without the vacuum's visibility map an index-only scan
    reads every row's page anyway, so a count over a million assignments costs what a production
    server's would not."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def server_environment(database_url, **variables):
    """The environment of a production-like server (DEBUG off) on `database_url`, plus `variables`."""
    return {
        **os.environ, "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": "benchmark-" + "x" * 50,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "DJANGO_SECURE_SSL_REDIRECT": "false",
        # Plain HTTP on loopback: cookies a client without TLS sends back.
        "DJANGO_CROSS_SITE_COOKIES": "false", "DJANGO_SESSION_COOKIE_SECURE": "false",
        "LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT),
        # Hundreds of simulated participants arrive from one address here.
        "STUDY_NEW_PARTICIPANTS_RATE": "1000000/h", **variables,
    }


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_gunicorn(environment, workers, *, address=None, prefix=(), application="crowdbench.wsgi:application",
                   python=sys.executable, cwd=ROOT, ready_path="/", **options):
    """gunicorn as the compose file's `web` service runs it, once it answers: (process, base URL).

    It binds `address` (host, port), by default a free port on loopback; `prefix` is a command it
    runs under (`ip netns exec NAME` puts it in a network namespace) and `options` go to Popen.
    Another project's server (the Label Studio anchor) names its own `application`, the `python`
    of its environment, the folder it runs in and a page that answers 200 once it is up."""
    host, port = address or ("127.0.0.1", _free_port())
    options.setdefault("stderr", subprocess.DEVNULL)
    server = subprocess.Popen(
        [*prefix, python, "-m", "gunicorn", application, "--bind",
         f"{host}:{port}", "--workers", str(workers), "--backlog", "2048"],
        cwd=cwd, env=environment, **options)
    base = f"http://{host}:{port}"
    for _ in range(300):
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn on {base} exited ({server.returncode})")
        try:
            with build_opener().open(base + ready_path, timeout=5):
                break
        except OSError:
            time.sleep(0.2)
    return server, base
