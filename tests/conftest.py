import pytest

from tests.factories import WorkerFactory


@pytest.fixture
def worker(db):
    return WorkerFactory()
