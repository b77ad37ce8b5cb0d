import pytest

from tests.factories import WorkerFactory


@pytest.fixture
def worker(db):
    return WorkerFactory()


@pytest.fixture
def openai_server(settings):
    """A loopback OpenAI chat completions server, and settings pointing the real client at it."""
    from tests.openai_fake import FakeOpenAI

    server = FakeOpenAI().start()
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
