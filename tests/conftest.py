import os
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection, connections, transaction
from django.test import TransactionTestCase, override_settings
from django.urls import get_resolver

from annotation.models import Table2Count, WorkflowCount
from crowdbench import scoping
from crowdbench.celery import app
from tests.celery_support import CeleryWorker
from tests.factories import WorkerFactory
from tests.redis_support import OwnRedis, use_broker

CHROMIUM = "/usr/bin/chromium"


def _empty_every_table(self):
    """What a transactional test leaves behind is deleted row by row, not truncated.

    Django's flush TRUNCATEs every table (a new file per table, each synced at commit: 0.3 s to
    2 s per test here, a few minutes of the suite) and then recreates the content types and
    permissions it removed. DELETE of the few rows a test wrote takes milliseconds; Django's
    foreign keys on PostgreSQL are DEFERRABLE INITIALLY DEFERRED, so the order of the tables does
    not matter, and the content types and permissions stay as migrate made them.
    """
    for alias in self._databases_names(include_mirrors=False):
        database = connections[alias]
        if database.vendor != "postgresql" or self.available_apps is not None or self.serialized_rollback:
            _django_fixture_teardown(self)
            continue
        kept = {ContentType._meta.db_table, Permission._meta.db_table}
        # The kept counts last: deleting a reference or an instance marks them (migrations 0039 and
        # 0041's triggers), and marks left for families deleted after them would outlive the test.
        counts = {Table2Count._meta.db_table, WorkflowCount._meta.db_table}
        tables = sorted((table for table in database.introspection.django_table_names(only_existing=True)
                         if table not in kept), key=lambda table: table in counts)
        with transaction.atomic(using=alias), database.cursor() as cursor:
            for table in tables:
                cursor.execute(f"DELETE FROM {database.ops.quote_name(table)}")


# A test builds its world and reads it back as the operator does, for every group; each request it
# makes through a client or a browser is in the scope of the user making it, as in production
# (crowdbench/scoping.py). tests/annotation/test_group_scope.py leaves this scope to see the rest.
# The URL configuration, and with it every view, serializer and filter, is loaded first, in no
# scope, as a web process loads it: a query one begins as it is imported is then narrowed when run.
get_resolver().check()
scoping.enter(scoping.EveryGroup("the test suite builds and checks every group's world"))

_django_fixture_teardown = TransactionTestCase._fixture_teardown
TransactionTestCase._fixture_teardown = _empty_every_table


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The modules holding slow tests (a browser, a Celery worker, a whole published file, a long
    property test: marked `slow`) are
    handed out first: pytest-xdist hands out whole modules, in the order it first meets them, and
    one of them given out last kept a worker busy minutes after the other had run out of work.
    Each module's tests are kept together in the order pytest-django gave them (database tests by
    kind), as a pytest-xdist worker runs them anyway: one module after another."""
    slow_modules = {item.module.__name__ for item in items
                    if any(item.get_closest_marker(mark) for mark in ("browser", "integration", "slow"))}
    first_seen = {}
    for index, item in enumerate(items):
        first_seen.setdefault(item.module.__name__, index)
    order = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda item: (item.module.__name__ not in slow_modules, first_seen[item.module.__name__],
                                 order[id(item)]))


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, request):
    """Each run's test databases are its own: pytest-django names one per xdist worker
    (`test_crowdbench_gw0`), and the run's id (shared by its workers) is added, so a second run on
    the same server, a developer's beside CI's, never drops the first one's databases."""
    from pytest_django.fixtures import _set_suffix_to_test_databases

    xdist = request.config.pluginmanager.hasplugin("xdist")
    run = request.getfixturevalue("testrun_uid") if xdist else uuid.uuid4().hex
    _set_suffix_to_test_databases(suffix=run[:8])


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database does not wait for its commits to reach the disk: a test commits thousands
    of times, and nothing here survives a crash of the database server, which no test causes (a
    cut connection, as the fault tests make, still loses nothing committed). Production keeps
    PostgreSQL's default."""
    if connection.vendor == "postgresql":
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            name = connection.ops.quote_name(connection.settings_dict["NAME"])
            cursor.execute(f"ALTER DATABASE {name} SET synchronous_commit TO off")
            cursor.execute("SET synchronous_commit TO off")


@pytest.fixture(scope="session", autouse=True)
def fast_password_hashing():
    """Passwords hashed with one round (Django's advice for tests) rather than PBKDF2's million,
    which took 0.5 to 2 s a user here; what is tested is who may sign in, not the hash's cost."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def endpoint_key_variables():
    """The variables the tests' endpoint models name for their keys, as an operator names theirs
    (ENDPOINT_MODEL_KEY_VARIABLES); a test of the refusal sets its own."""
    names = ["CROWDBENCH_TEST_ENDPOINT_KEY", "MODEL_KEY", "ALPHA_KEY", "KEY"]
    # In the environment too, for the Celery workers the integration tests start.
    before = os.environ.get("ENDPOINT_MODEL_KEY_VARIABLES")
    os.environ["ENDPOINT_MODEL_KEY_VARIABLES"] = ",".join(names)
    with override_settings(ENDPOINT_MODEL_KEY_VARIABLES=names):
        yield
    if before is None:
        os.environ.pop("ENDPOINT_MODEL_KEY_VARIABLES", None)
    else:
        os.environ["ENDPOINT_MODEL_KEY_VARIABLES"] = before


@pytest.fixture(scope="session", autouse=True)
def broker_of_this_run(tmp_path_factory):
    """Each test process (each pytest-xdist worker) queues its jobs on a redis-server of its own,
    so two workers, or two runs on one machine, never take each other's jobs. Without redis-server
    the configured CELERY_BROKER_URL is used as it is."""
    if not django_settings.CELERY_BROKER_URL.startswith("redis") or not OwnRedis.installed():
        yield
        return
    server = OwnRedis(tmp_path_factory.mktemp("redis")).start()
    configured = django_settings.CELERY_BROKER_URL
    django_settings.CELERY_BROKER_URL = server.url
    use_broker(server.url)
    yield
    use_broker(configured)
    django_settings.CELERY_BROKER_URL = configured
    server.stop()


@pytest.fixture(scope="session", autouse=True)
def figures_of_this_run(tmp_path_factory):
    """Leaderboard figures kept in a folder of this test process, not the checkout's var/."""
    from django.conf import settings

    storages = {**settings.STORAGES, "figures": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                                                 "OPTIONS": {"location": str(tmp_path_factory.mktemp("figures"))}}}
    with override_settings(STORAGES=storages):
        yield


@pytest.fixture
def worker(db):
    return WorkerFactory()


@pytest.fixture
def openai_server(settings):
    """A loopback OpenAI chat completions server, and settings pointing the real client at it."""
    from tests.openai_fake import FakeOpenAI

    server = FakeOpenAI().start()
    # The server also plays a tournament's endpoint models, which reach loopback only when allowed.
    settings.ENDPOINT_MODEL_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.OPENAI_REFERENCE_MODEL = "gpt-4"
    yield server
    server.stop()


@pytest.fixture
def judge_server(openai_server, settings):
    """The loopback server as the LLM judge's endpoint, with batch polling that does not sleep."""
    settings.JUDGE_BASE_URL = openai_server.base_url
    settings.JUDGE_API_KEY = "judge-key"
    settings.JUDGE_MODEL = "gpt-4"
    settings.JUDGE_FALLBACK_MODEL = ""
    settings.JUDGE_BATCH_POLL_SECONDS = 0
    return openai_server


@pytest.fixture
def mturk(settings, monkeypatch):
    """botocore's Stubber on the MTurk client our code uses (see tests/mturk_wire.py)."""
    from tests.mturk_wire import MTurkWire

    with MTurkWire(settings, monkeypatch) as wire:
        yield wire


@pytest.fixture
def prolific(settings):
    """Prolific's API on loopback (tests/mturk_wire.FakeProlific), and settings pointing at it."""
    from tests.mturk_wire import FakeProlific

    server = FakeProlific()
    settings.PROLIFIC_API_URL = server.url
    settings.PROLIFIC_API_TOKEN = server.token
    settings.PLATFORM_HTTP_RETRY_BASE_SECONDS = 0.001
    yield server
    server.stop()


@pytest.fixture
def toloka(settings):
    """Toloka's API on loopback (tests/mturk_wire.FakeToloka), called by the real toloka-kit client."""
    from tests.mturk_wire import FakeToloka

    server = FakeToloka()
    settings.TOLOKA_API_URL = server.url
    settings.TOLOKA_API_TOKEN = server.token
    yield server
    server.stop()


@pytest.fixture
def connect(settings):
    """CloudResearch Connect's API on loopback (tests/mturk_wire.FakeConnect)."""
    from tests.mturk_wire import FakeConnect

    server = FakeConnect()
    settings.CLOUDRESEARCH_API_URL = server.url
    settings.CLOUDRESEARCH_API_KEY = server.key
    settings.PLATFORM_HTTP_RETRY_BASE_SECONDS = 0.001
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium through Playwright, one per test module."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: run scripts/ensure-browser.sh")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        # While Playwright's loop runs in this thread, asgiref keeps Django's connections per
        # context rather than per thread; the ones opened meanwhile are closed here, in that
        # context, or the test database could not be dropped at the end of the session.
        connections.close_all()
        browser.close()


@pytest.fixture
def start_worker(openai_server, tmp_path):
    """Start a worker (with extra environment if asked) once the queue holds nothing stale."""
    # The worker is another process: it can share neither an in-memory SQLite test database nor
    # the file broker of the embedded default without reaching a developer's own worker.
    if connection.vendor != "postgresql" or not django_settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs DATABASE_URL for PostgreSQL and CELERY_BROKER_URL for Redis (make test)")
    app.conf.broker_url = django_settings.CELERY_BROKER_URL
    app.control.purge()
    workers = []

    def start(extra_args=(), **environment):
        worker = CeleryWorker(log_path=tmp_path / f"worker-{len(workers)}.log",
                              openai_base_url=openai_server.base_url, extra_args=extra_args,
                              **environment)
        workers.append(worker)
        worker.wait_for_log(" ready.")
        return worker

    yield start
    for worker in workers:
        worker.stop()
    app.control.purge()


@pytest.fixture
def snapshot_folder(settings, tmp_path):
    """Snapshots built into this test's own folder, which it returns."""
    settings.STORAGES = {
        **settings.STORAGES,
        "snapshots": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                      "OPTIONS": {"location": str(tmp_path / "snapshots")}},
    }
    return tmp_path / "snapshots"


@pytest.fixture
def cache_redis(settings, tmp_path):
    """The cache on a redis-server of the test's own, shared by every process as production has
    it; stop() to take it away."""
    from crowdbench import shared_cache

    if not OwnRedis.installed():
        pytest.skip("needs redis-server")
    server = OwnRedis(tmp_path).start()
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": server.url,
                                   "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}}
    shared_cache._last_warned.clear()
    yield server
    server.stop()


@pytest.fixture
def fresh_cache():
    """Django's cache emptied around the test: the admin caches whether a Celery worker answers,
    once per process."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()
