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
