"""Revocations on a MongoDB store made by a process whose clock is behind: the later revoke wins.

Each process that writes to the store's ledger (the CLI's ``raytuner keys``, a running server) reads its own
clock; the clocks of a cluster's nodes disagree. A test plays the lagging process by putting a clock an hour
behind into every module of raytuner that reads the time, against a real ``mongod``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from click.testing import CliRunner
from record_helpers import known

from raytuner.cli import main as cli
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.service import access, auth
from raytuner.service.access import ProblemAccess
from raytuner.service.auth import ApiKeys
from raytuner.service.server import TuningServer
from raytuner.store import ledger
from raytuner.store.mongo_store import MongoStore

#: How far behind the lagging process's clock is.
LAG_SECONDS = 3600.0


def lagging_clock() -> SimpleNamespace:
    """The ``time`` module as a process whose wall clock is :data:`LAG_SECONDS` behind sees it."""
    return SimpleNamespace(
        time=lambda: time.time() - LAG_SECONDS,
        time_ns=lambda: time.time_ns() - int(LAG_SECONDS * 1e9),
        monotonic=time.monotonic,
        sleep=time.sleep,
    )


@pytest.fixture
def lagging(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Makes the modules that write the ledger read a clock an hour behind, while the test is in the block."""

    class Lag:
        def __enter__(self) -> None:
            for module in (ledger, auth, access):
                monkeypatch.setattr(module, "time", lagging_clock(), raising=False)

        def __exit__(self, *exc: object) -> None:
            monkeypatch.undo()

    yield Lag()


@pytest.fixture
def uri(mongo_store: MongoStore) -> str:
    """The URI of a store of its own on the session's ``mongod`` (database in the path)."""
    return f"{mongo_store.uri.rstrip('/')}/{mongo_store.database}"


@pytest.mark.parametrize("kind", ["mongo_store", "replica_store"])
def test_a_revoke_from_a_lagging_clock_revokes_the_key(request: pytest.FixtureRequest, kind: str, lagging: Any) -> None:
    mongo_store = request.getfixturevalue(kind)  # a standalone server, then a replica set (cluster time)
    keys = ApiKeys(mongo_store.ledger())
    key = keys.create("alice")
    key_id = known(keys.verify(key)).key_id
    other = MongoStore(mongo_store.uri, database=mongo_store.database)  # the CLI's process
    try:
        with lagging:
            ApiKeys(other.ledger()).revoke(key_id)
        assert ApiKeys(other.ledger()).verify(key) is None
        keys.refresh()
        assert keys.verify(key) is None
        assert [k.revoked for k in keys.list()] == [True]
    finally:
        other.close()


def test_a_revoke_written_before_its_key_still_revokes(mongo_store: MongoStore) -> None:
    """Ledgers written by an earlier release ordered appends by the writer's clock: the revoke may come first."""
    keys = ApiKeys(mongo_store.ledger())
    key = keys.create("alice")
    key_id = known(keys.verify(key)).key_id
    collection = mongo_store.client[mongo_store.database]["service_keys"]
    collection.insert_one({"key_id": key_id, "revoke": True, "time": 0.0, "_order": 1})  # an old release's order
    keys.refresh()
    assert keys.verify(key) is None


def test_a_grant_revoked_from_a_lagging_clock_ends(mongo_store: MongoStore, lagging: Any) -> None:
    server_side = ProblemAccess(mongo_store.ledger(), mongo_store)
    server_side.admit("demo", "key1", "owner")
    server_side.grant("key1", "demo", "key2")
    assert server_side.may_read("key2", "demo")
    other = MongoStore(mongo_store.uri, database=mongo_store.database)
    try:
        with lagging:
            ProblemAccess(other.ledger(), other).admit("demo", "key2", "revoke")
        for fresh in (server_side, ProblemAccess(mongo_store.ledger(), mongo_store)):
            fresh._refresh(force=True)
            assert not fresh.may_read("key2", "demo")
    finally:
        other.close()


def test_a_running_server_sees_a_lagging_cli_revoke(mongo_store: MongoStore, uri: str, lagging: Any) -> None:
    server = TuningServer(mongo_store, port=0)
    server.start()
    channel = grpc.insecure_channel(server.address)
    try:
        owner = server.keys.create("alice")
        key = server.keys.create("bob")
        stub = pb_grpc.TuningServiceStub(channel)

        def listing(with_key: str) -> grpc.StatusCode:
            try:
                stub.ListSessions(pb.ListSessionsRequest(), metadata=(("x-api-key", with_key),), timeout=20)
            except grpc.RpcError as exc:
                return exc.code()
            return grpc.StatusCode.OK

        assert listing(key) == grpc.StatusCode.OK
        key_id = known(server.keys.verify(key)).key_id
        with lagging:
            result = CliRunner().invoke(cli, ["keys", "revoke", "--mongodb", uri, key_id])
        assert result.exit_code == 0, result.output
        assert f"revoked {key_id}" in result.output
        deadline = time.monotonic() + 2 * auth.REFRESH_SECONDS + 5
        while listing(key) == grpc.StatusCode.OK and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listing(key) == grpc.StatusCode.UNAUTHENTICATED
        assert listing(owner) == grpc.StatusCode.OK  # the other keys go on
    finally:
        channel.close()
        server.stop(grace=0)
