"""``sync_crowd_repo``: tuning uploads its records to the crowd repository (real server, real mongod, real Ray)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from raytuner.client.crowd import CrowdClient, sync_store_for
from raytuner.client.remote import RemoteTuner, ServiceError
from raytuner.crowd.sync import CrowdSyncStore
from raytuner.engines import MLA, RandomSearch
from raytuner.errors import InvalidInputError
from raytuner.models.executors import InlineExecutor
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import FunctionEvaluation
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore

PROBLEM = "synced"
SPACE = {
    "input_space": [{"name": "t", "type": "integer", "lower_bound": 1, "upper_bound": 10}],
    "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
    "output_space": [{"name": "y", "type": "real"}],
}


def meta(key: str | None, sync: str = "yes") -> MetaDescription:
    data: dict[str, Any] = {
        "tuning_problem_name": PROBLEM,
        "problem_space": SPACE,
        "sync_crowd_repo": sync,
        "machine_configuration": {"machine_name": "laptop"},
    }
    if key is not None:
        data["api_key"] = key
    return MetaDescription.parse(data)


def tune(store: Any, n: int, seed: int = 0) -> list[FunctionEvaluation]:
    problem = meta(None).problem_space
    session = TuningSession.resume(problem, RandomSearch(problem, [{"t": 3}], seed=seed), store, PROBLEM)
    told = []
    for _ in range(n):
        trial = session.ask()
        told.append(session.tell(trial, {"y": (trial.config["x"] - 0.3) ** 2}))
    return told


@pytest.fixture
def alice(crowd: tuple[Any, Any, str]) -> tuple[str, str]:
    server, repository, _ = crowd
    repository.add_user("alice", "alice@example.org")
    repository.add_user("bob", "bob@example.org")
    return server.address, repository.create_key("alice")


def crowd_uids(address: str, key: str) -> set[str]:
    with CrowdClient(address, key) as client:
        return {r.uid for r in client.query_function_evaluations(PROBLEM)}


def test_a_synced_session_uploads_every_record(
    alice: tuple[str, str], crowd: tuple[Any, Any, str], tmp_path: Path
) -> None:
    address, key = alice
    store = sync_store_for(meta(key), tmp_path / "history", server=address, access="private")
    assert isinstance(store, CrowdSyncStore)
    told = tune(store, 5)
    assert store.unsent == 0
    assert (
        crowd_uids(address, key)
        == {r.uid for r in told}
        == {r.uid for r in JsonStore(tmp_path / "history").evaluations(PROBLEM)}
    )
    bob = crowd[1].create_key("bob")
    assert crowd_uids(address, bob) == set()  # private: alice's only


def test_surrogate_models_sync_like_evaluations(
    alice: tuple[str, str], crowd: tuple[Any, Any, str], tmp_path: Path
) -> None:
    """A run's surrogate-model records reach the crowd too: from a local run and from a service session."""
    address, key = alice
    problem = meta(None).problem_space
    store = sync_store_for(meta(key), tmp_path / "history", server=address, access="private")
    assert isinstance(store, CrowdSyncStore)
    session = TuningSession.resume(
        problem, MLA(problem, [{"t": 3}], seed=0, n_initial=3, executor=InlineExecutor()), store, PROBLEM
    )
    for _ in range(5):
        trial = session.ask()
        session.tell(trial, {"y": (trial.config["x"] - 0.3) ** 2})
    local = {m.uid for m in JsonStore(tmp_path / "history").models(PROBLEM)}
    assert local and store.unsent == 0
    with CrowdClient(address, key) as client:
        assert {m.uid for m in client.query_surrogate_models(PROBLEM)} == local
    with RemoteTuner(address, crowd[0].keys.create("alice-at-the-service"), timeout=60) as tuner:
        tuner.create_session(
            meta(key), "mla", tasks=[{"t": 2}], seed=1, options={"n_initial": 3, "crowd_access": "public"}
        )  # the creator's choice
        assert tuner.run(lambda config, task, fidelity: (config["x"] - 0.2) ** 2, max_trials=5) == 5
    served = {m.uid for m in crowd[0].store.models(PROBLEM)}
    assert served
    with CrowdClient(address, key) as client:
        assert {m.uid for m in client.query_surrogate_models(PROBLEM)} == local | served
    with CrowdClient(address, crowd[1].create_key("bob")) as client:  # the local run's are private
        assert {m.uid for m in client.query_surrogate_models(PROBLEM)} == served


def test_sync_off_is_the_plain_store_and_bad_settings_name_the_field(tmp_path: Path) -> None:
    plain = sync_store_for(meta(None, sync="no"), tmp_path / "h")
    assert isinstance(plain, JsonStore)
    with pytest.raises(InvalidInputError, match="api_key"):
        sync_store_for(meta(None), tmp_path / "h")
    with pytest.raises(InvalidInputError, match="access") as info:
        sync_store_for(meta("rt_x"), tmp_path / "h", access="everyone")
    assert "registered" in str(info.value)


def test_an_outage_loses_nothing_and_a_resumed_run_catches_up(
    alice: tuple[str, str], tmp_path: Path, reserved_port: int
) -> None:
    address, key = alice
    down = f"127.0.0.1:{reserved_port}"  # nothing listens there, nor can while we hold it
    store = sync_store_for(meta(key), tmp_path / "history", server=down, timeout=0.5, retries=0)
    assert isinstance(store, CrowdSyncStore)
    told = tune(store, 4)  # tuning goes on while the crowd is away
    assert store.unsent == 4
    assert len(JsonStore(tmp_path / "history").evaluations(PROBLEM)) == 4
    store.close()  # still down: logged, left for a later run
    # a later run (the same history) reaches the repository: its first record brings the earlier ones along
    again = sync_store_for(meta(key), tmp_path / "history", server=address)
    assert isinstance(again, CrowdSyncStore)
    told += tune(again, 2, seed=1)
    assert again.unsent == 0
    assert crowd_uids(address, key) == {r.uid for r in told}


def test_imported_records_are_not_uploaded_as_ours(alice: tuple[str, str], tmp_path: Path) -> None:
    address, key = alice
    local = JsonStore(tmp_path / "history")
    foreign = FunctionEvaluation.create({"t": 3}, {"x": 0.5}, {"y": 0.04})  # a GPTune file's record
    local.append(PROBLEM, foreign)
    told = tune(sync_store_for(meta(key), local, server=address), 2)
    assert crowd_uids(address, key) == {r.uid for r in told}


def test_a_service_session_with_sync_uploads_as_the_crowd_user(
    alice: tuple[str, str], crowd: tuple[Any, Any, str]
) -> None:
    address, key = alice
    server = crowd[0]
    service_key = server.keys.create("alice-at-the-service")
    with RemoteTuner(address, service_key, timeout=20) as tuner:
        tuner.create_session(meta(key), "random", tasks=[{"t": 2}], seed=1)
        assert tuner.run(lambda config, task, fidelity: (config["x"] - 0.2) ** 2, max_trials=3) == 3
        uids = {r.uid for r in tuner.query_evaluations(PROBLEM)}
        assert len(uids) == 3 and crowd_uids(address, key) == uids
        session_doc = next(iter(server.ledger.read("sessions")))
        assert "api_key" not in session_doc["meta"] and session_doc["crowd_user"] == "alice"
        assert session_doc["crowd_access"] == "private"  # the default: the creator's own data
        with CrowdClient(address, crowd[1].create_key("bob")) as client:
            assert not {r.uid for r in client.query_function_evaluations(PROBLEM)} & uids
        for bad, options, code, field in [
            (meta(None), {}, "INVALID_ARGUMENT", "api_key"),
            (meta("rt_" + "0" * 20 + "_" + "1" * 43), {}, "UNAUTHENTICATED", "api_key"),
            (meta(key), {"crowd_access": "shared"}, "INVALID_ARGUMENT", "options.crowd_access"),
            (meta(key, sync="no"), {"crowd_access": "public"}, "INVALID_ARGUMENT", "options.crowd_access"),
        ]:
            with pytest.raises(ServiceError) as info:
                tuner.create_session(bad, "random", tasks=[{"t": 2}], options=options)
            assert info.value.code == code and field in str(info.value)


def test_a_server_without_crowd_refuses_sync(server: Any) -> None:
    with RemoteTuner(server.address, server.keys.create("carol"), timeout=20) as tuner:
        with pytest.raises(ServiceError) as info:
            tuner.create_session(meta("rt_x"), "random", tasks=[{"t": 2}])
    assert info.value.code == "INVALID_ARGUMENT" and "sync_crowd_repo" in str(info.value)


def test_a_restarted_server_goes_on_syncing(
    alice: tuple[str, str], crowd: tuple[Any, Any, str], tmp_path: Path
) -> None:
    from raytuner.service.server import TuningServer

    address, key = alice
    server, _, uri = crowd
    service_key = server.keys.create("dave")
    with RemoteTuner(address, service_key, timeout=20) as tuner:
        tuner.create_session(meta(key), "random", tasks=[{"t": 2}], seed=1)
        tuner.run(lambda config, task, fidelity: config["x"], max_trials=2)
        session_id = tuner.session_id
    server.stop(grace=0)
    again = TuningServer(tmp_path / "store", port=0, crowd=uri)
    again.start()
    try:
        with RemoteTuner(again.address, service_key, timeout=20) as tuner:
            tuner.session_id = session_id
            tuner.run(lambda config, task, fidelity: config["x"], max_trials=2)
            uids = {r.uid for r in tuner.query_evaluations(PROBLEM)}
        assert len(uids) == 4 and crowd_uids(again.address, key) == uids
    finally:
        again.stop(grace=0)


@pytest.mark.slow
def test_a_ray_run_with_a_synced_store(alice: tuple[str, str], tmp_path: Path, local_ray: None) -> None:
    from ray import tune as ray_tune
    from raytuner.searchers import RandomSearcher

    address, key = alice
    description = meta(key)
    store = sync_store_for(description, tmp_path / "history", server=address)
    searcher = RandomSearcher(
        description.problem_space, tasks=[{"t": 4}], store=store, problem_name=description.tuning_problem_name, seed=0
    )

    def trainable(config: dict[str, Any]) -> None:
        ray_tune.report({"y": (config["x"] - 0.4) ** 2})

    ray_tune.run(
        trainable,
        search_alg=searcher,
        num_samples=4,
        max_concurrent_trials=2,
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        verbose=0,
    )  # not ~/ray_results
    local = {r.uid for r in JsonStore(tmp_path / "history").evaluations(PROBLEM)}
    assert len(local) == 4 and crowd_uids(address, key) == local


def test_a_failed_upload_is_sent_with_the_next_record(tmp_path: Path) -> None:
    """The wrapper takes any uploader: a failing one keeps the records, a working one sends them in order."""
    sent: list[str] = []
    attempts = iter([grpc.RpcError("down"), None, None, None])

    def upload(problem: str, records: list[FunctionEvaluation]) -> None:
        error = next(attempts)
        if error is not None:
            raise error
        sent.extend(r.uid for r in records)

    store = CrowdSyncStore(JsonStore(tmp_path / "h"), upload)
    told = tune(store, 2)
    assert store.unsent == 0 and sent == [r.uid for r in told]


def test_a_crowd_key_signs_in_to_the_tuning_service_too(alice: tuple[str, str], crowd: tuple[Any, Any, str]) -> None:
    """One identity: a crowd user's key works for tuning sessions, which then belong to the user, not the key."""
    address, key = alice
    repository = crowd[1]
    second = repository.create_key("alice")
    with RemoteTuner(address, key, timeout=20) as tuner:
        session_id = tuner.create_session(meta(None), "random", tasks=[{"t": 2}], seed=2)  # sync, no api_key
        assert tuner.run(lambda config, task, fidelity: config["x"], max_trials=2) == 2
    with RemoteTuner(address, second, timeout=20) as tuner:  # the user's other key
        assert [s["session_id"] for s in tuner.sessions()] == [session_id]
    assert len(crowd_uids(address, key)) == 2  # uploaded as the caller
    with RemoteTuner(address, repository.create_key("bob"), timeout=20) as tuner:
        assert tuner.sessions() == []  # not bob's
    repository.revoke_key(key.split("_")[1])
    with RemoteTuner(address, key, timeout=20, retries=0) as tuner:
        with pytest.raises(ServiceError) as info:
            tuner.sessions()
    assert info.value.code == "UNAUTHENTICATED"
