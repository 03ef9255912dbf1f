"""Every result is a record (issue 17, item 3): a result that is not a finite number is stored as a failed record.

Through every face, against the real parts: the records themselves (created, and read from a GPTune
file in a real JsonStore), a TuningSession on a JsonStore, the gRPC service on loopback (RemoteTuner and
the raw protocol), and a real local Ray running the searcher and the GPTuneBand scheduler.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from record_helpers import json_directory, known, provenance
from repo_data import GPTUNE_DEMO

from raytuner.engines import RandomSearch
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, as_number, parse_outputs
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM

DEMO_FILE = GPTUNE_DEMO
PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)

BAD_RESULTS = [
    ({"y": "fast"}, "y: 'fast' is not a number"),
    ({"y": None}, "y: no value"),
    ({"y": True}, "y: True is not a number"),
    ({"y": [1.0, 2.0]}, "y: [1.0, 2.0] is not a number"),
    ({"y": float("nan")}, "non-finite output y=nan"),
    ({"y": -float("inf")}, "non-finite output y=-inf"),
    ({"y": 1.0, "runtime": "fast"}, "runtime: 'fast' is not a number"),
]


# -- the one conversion ----------------------------------------------------------------------------


def test_numbers_are_finite_reals_and_nothing_else() -> None:
    assert [as_number(v) for v in (2, 2.5, np.float32(0.5), np.int64(3), np.array(1.5))] == [2.0, 2.5, 0.5, 3.0, 1.5]
    assert [
        as_number(v) for v in ("2", b"2", True, np.bool_(True), None, float("nan"), np.array([1.0, 2.0]), {"y": 1}, 1j)
    ] == [None] * 9
    assert parse_outputs({"y": np.float64(0.25)}) == ({"y": 0.25}, None)
    assert parse_outputs(None) == ({}, "no output reported")


@pytest.mark.parametrize(("result", "reason"), BAD_RESULTS)
def test_a_bad_result_makes_a_failed_record_with_the_reason(result: dict, reason: str) -> None:
    record = FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, result)
    assert record.status == "failed" and provenance(record).failure_message == reason
    assert all(v is None for v in record.evaluation_result.values()) and record.value("y") is None, (
        "a failed record's outputs are null, as GPTune writes them"
    )
    assert FunctionEvaluation.model_validate(json.loads(json.dumps(record.to_dict()))) == record


def test_a_long_bad_value_is_shortened_in_the_reason() -> None:
    record = FunctionEvaluation.create({}, {"x": 0.5}, {"y": "z" * 500})
    assert record.status == "failed" and len(known(provenance(record).failure_message)) < 100


# -- records read from a GPTune file ---------------------------------------------------------------


def test_a_gptune_record_holding_no_number_is_read_as_failed(tmp_path: Path) -> None:
    raw = json.loads(DEMO_FILE.read_text())
    edited = copy.deepcopy(raw)
    edited["func_eval"][3]["evaluation_result"]["y"] = "oops"
    edited["func_eval"][5]["evaluation_result"]["y"] = True  # a bool is not a number
    edited["func_eval"][7]["evaluation_result"]["y"] = None
    (tmp_path / "GPTune-Demo.json").write_text(json.dumps(edited))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    records = JsonStore(tmp_path).evaluations("GPTune-Demo")
    assert len(records) == 70
    failed = {i: provenance(r).failure_message for i, r in enumerate(records) if r.status != "ok"}
    assert failed == {3: "y: 'oops' is not a number", 5: "y: True is not a number", 7: "y: no value"}
    assert records[3].evaluation_result == {"y": "oops"}  # the data is kept as read
    assert all(r.value("y") is None for i, r in enumerate(records) if i in failed)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # reading wrote nothing

    # GPTune's own numeric records round-trip unchanged (no raytuner key is added to them)
    document = HistoryDocument.model_validate(edited)
    written = document.to_dict()["func_eval"]
    assert [w for i, w in enumerate(written) if i not in failed] == [
        e for i, e in enumerate(edited["func_eval"]) if i not in failed
    ]
    # ... and a failed one keeps its machine under raytuner, so GPTune's load check passes over it
    assert written[3]["raytuner"] == {
        "status": "failed",
        "failure_message": "y: 'oops' is not a number",
        "machine_configuration": edited["func_eval"][3]["machine_configuration"],
    }
    assert "machine_configuration" not in written[3]
    assert HistoryDocument.model_validate(document.to_dict()).func_eval == document.func_eval
    assert HistoryDocument.model_validate(raw).to_dict() == raw


# -- a TuningSession on a real JsonStore ------------------------------------------------------------


@pytest.mark.parametrize(("result", "reason"), BAD_RESULTS)
def test_a_session_stores_a_bad_result_as_a_failed_record(tmp_path: Path, result: dict, reason: str) -> None:
    store = JsonStore(tmp_path)
    session = TuningSession(PROBLEM, RandomSearch(PROBLEM, [{"t": 1.0}], seed=0), store, "demo")
    trial = session.ask()
    record = session.tell(trial, result)
    stored = JsonStore(tmp_path).evaluations("demo")
    assert [r.uid for r in stored] == [record.uid]
    assert stored[0].status == "failed" and provenance(stored[0]).failure_message == reason
    assert not session.pending and session.best({"t": 1.0}) is None
    good = session.ask()  # the engine goes on
    assert session.tell(good, {"y": 0.5}).status == "ok"
    assert len(JsonStore(tmp_path).evaluations("demo")) == 2


def test_a_session_stores_a_result_that_is_no_mapping_as_failed(tmp_path: Path) -> None:
    session = TuningSession(PROBLEM, RandomSearch(PROBLEM, [{"t": 1.0}], seed=0), JsonStore(tmp_path), "demo")
    record = session.tell(session.ask(), "fast")  # type: ignore[arg-type]  # the wrong type is what the test gives
    assert record.status == "failed" and "not a mapping" in known(provenance(record).failure_message)
    assert JsonStore(tmp_path).evaluations("demo")[0].status == "failed"


# -- the gRPC service on loopback -------------------------------------------------------------------

SERVICE_META = {"tuning_problem_name": "records_demo", "problem_space": DEMO_PROBLEM}


def test_the_service_stores_a_bad_result_as_a_failed_record(server: Any) -> None:
    import grpc  # only the service tests pay for gRPC

    from raytuner.client.remote import RemoteTuner
    from raytuner.protocol.v1 import tuning_pb2 as pb
    from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc

    key = server.keys.create("alice")
    with RemoteTuner(server.address, key, timeout=20, backoff=0.05) as tuner:
        tuner.create_session(SERVICE_META, "random", tasks=[{"t": 1.0}], seed=0, max_evaluations=6)
        fast, missing, nan = known(tuner.ask()), known(tuner.ask()), known(tuner.ask())
        told = [tuner.tell(fast, {"y": "fast"}), tuner.tell(missing, {"y": None}), tuner.tell(nan, {"y": float("nan")})]
        assert all(t.failed and not t.duplicate for t in told)
        assert tuner.tell(nan, {"y": float("nan")}).duplicate  # a retry is the same failed record
        # the objective loop: a mapping holding no number is a failed trial, and the loop goes on
        not_a_number: Any = {"y": "fast"}
        assert tuner.run(lambda config, task, fidelity: not_a_number, max_trials=1) == 1

        # the raw protocol: a NaN or infinite output is a result too, stored as a failed record
        trial = known(tuner.ask())
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.TuningServiceStub(channel)
            answer = stub.Tell(
                pb.TellRequest(session_id=tuner.session_id, trial_id=trial.trial_id, outputs={"y": float("inf")}),
                metadata=(("x-api-key", key),),
                timeout=20,
            )
        assert answer.failed and answer.uid
        info = tuner.session()
        assert info["evaluations"] == 5 and info["failed"] == 5 and info["pending"] == 0

    reasons = [
        provenance(r).failure_message for r in JsonStore(json_directory(server.store)).evaluations("records_demo")
    ]
    assert reasons == [
        "y: 'fast' is not a number",
        "y: no value",
        "non-finite output y=nan",
        "y: 'fast' is not a number",
        "non-finite output y=inf",
    ]


# -- a real local Ray: the searcher and the GPTuneBand scheduler --------------------------------------


def fast_on_the_small_task(config: dict) -> None:
    from ray import tune

    tune.report({"y": "fast" if config["t"] < 1 else (config["x"] - 0.3) ** 2})


def fast_at_the_low_fidelity(config: dict) -> None:
    from ray import tune

    tune.report({"y": "fast" if config["fidelity"] < 2 else (config["x"] - 0.3) ** 2})


@pytest.mark.slow
def test_a_ray_trial_reporting_fast_is_stored_as_a_failed_record(local_ray: Any, tmp_path: Path) -> None:
    from ray import tune
    from raytuner.searchers import RandomSearcher

    store = JsonStore(tmp_path / "store")
    searcher = RandomSearcher(PROBLEM, [{"t": 0.5}, {"t": 2.0}], store, "ray_demo", seed=1)
    tune.run(
        fast_on_the_small_task,
        search_alg=searcher,
        num_samples=4,
        max_concurrent_trials=2,
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        verbose=0,
    )
    records = JsonStore(tmp_path / "store").evaluations("ray_demo")
    assert len(records) == 4
    failed = [r for r in records if r.status == "failed"]
    assert [r.task_parameter["t"] for r in failed] == [0.5, 0.5]
    assert {provenance(r).failure_message for r in failed} == {"y: 'fast' is not a number"}
    assert all(r.status == "ok" and r.value("y") is not None for r in records if r.task_parameter["t"] == 2.0)


@pytest.mark.slow
def test_a_band_trial_reporting_fast_is_stored_as_a_failed_record(local_ray: Any, tmp_path: Path) -> None:
    from ray import tune
    from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler

    from raytuner.engines import BanditStructure
    from raytuner.models import LCMOptions
    from raytuner.models.executors import InlineExecutor

    scheduler = GPTuneBandScheduler(
        PROBLEM,
        [{"t": 1.0}],
        JsonStore(tmp_path / "store"),
        "band_demo",
        seed=0,
        structure=BanditStructure.hyperband(1, 2, 2),
        options=GPTuneBandOptions(
            executor=InlineExecutor(), lcm=LCMOptions(n_starts=1, warm_starts=1, max_iterations=30, screen=2)
        ),
    )
    tune.run(
        fast_at_the_low_fidelity,
        search_alg=scheduler.searcher(),
        scheduler=scheduler,
        num_samples=-1,
        max_concurrent_trials=2,
        reuse_actors=True,
        verbose=0,
        storage_path=str(tmp_path / "ray"),
    )
    records = JsonStore(tmp_path / "store").evaluations("band_demo")
    assert records and scheduler.engine.finished
    low = [r for r in records if provenance(r).fidelity == 1]
    assert low and all(
        r.status == "failed" and provenance(r).failure_message == "y: 'fast' is not a number" for r in low
    )
    assert all(r.status == "ok" for r in records if provenance(r).fidelity == 2)
    assert not any(provenance(r).rung for r in records)  # a failed evaluation is never promoted
