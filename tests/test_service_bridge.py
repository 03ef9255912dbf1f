"""The bridge for Ray trials: a Ray Tune run on a real local Ray feeds the service's repository,
and transfer learning reads its source data back through the service."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from record_helpers import json_directory

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402
from raytuner.searchers import ServiceCallback  # noqa: E402
from record_helpers import known, provenance  # noqa: E402

from raytuner.client import RemoteSource  # noqa: E402
from raytuner.client.remote import RemoteTuner  # noqa: E402
from raytuner.engines.transfer import TransferLearning  # noqa: E402
from raytuner.problem.space import ProblemSpace  # noqa: E402
from raytuner.service.server import TuningServer  # noqa: E402
from raytuner.store import JsonStore  # noqa: E402
from raytuner.test_problems import DEMO_PROBLEM, demo  # noqa: E402

pytestmark = pytest.mark.slow


def trainable(config: dict[str, Any]) -> None:
    if config["x"] >= 0.9:
        raise RuntimeError("diverged")  # an errored trial: a failed record
    tune.report({"y": demo(config["x"], config["t"])})


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[TuningServer, RemoteTuner]]:
    server = TuningServer(tmp_path / "repo", port=0)
    server.start()
    client = RemoteTuner(server.address, server.keys.create("cluster"))
    yield server, client
    client.close()
    server.stop(grace=0)


def test_ray_trials_reach_the_repository_and_feed_transfer_learning(
    local_ray: None, service: tuple[TuningServer, RemoteTuner], tmp_path: Path
) -> None:
    server, client = service
    callback = ServiceCallback(client, "ray_source", outputs=["y"], task_keys=["t"], machine={"machine_name": "laptop"})
    xs = [i / 10 for i in range(10)]
    tune.run(
        trainable,
        config={"x": tune.grid_search(xs), "t": 0.8},
        callbacks=[callback],
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        raise_on_failed_trial=False,
        verbose=0,
    )
    records = JsonStore(json_directory(server.store)).evaluations("ray_source")
    assert len(records) == 10 and callback.sent == 10 and not callback.unsent
    failed = [r for r in records if r.status != "ok"]
    assert [r.tuning_parameter["x"] for r in failed] == [0.9] and "diverged" in known(
        provenance(failed[0]).failure_message
    )
    ok = {r.tuning_parameter["x"]: r for r in records if r.status == "ok"}
    assert ok[0.3].value("y") == pytest.approx(demo(0.3, 0.8)) and ok[0.3].task_parameter == {"t": 0.8}
    assert ok[0.3].machine_configuration["machine_name"] == "laptop"
    assert known(provenance(ok[0.3]).machine)["host"] == socket.gethostname()
    assert all(k == "machine_name" or "nodes" in v for k, v in ok[0.3].machine_configuration.items())
    assert ok[0.3].software_configuration["ray"]["version_str"] == ray.__version__

    source = RemoteSource(client, "ray_source", {"task": {"t": {"low": 0.5, "high": 1.0}}, "status": ["ok"]})
    assert sorted(r.tuning_parameter["x"] for r in source.evaluations()) == xs[:9]
    engine = TransferLearning(ProblemSpace.parse(DEMO_PROBLEM), {"t": 1.0}, source, "weighted_sum_equal", seed=0)
    assert 0.0 <= engine.ask().config["x"] <= 1.0


def test_records_wait_while_the_service_is_down(tmp_path: Path, reserved_port: int) -> None:
    server = TuningServer(tmp_path / "repo", port=reserved_port)  # held: the restart gets it back
    port = server.start()
    key = server.keys.create("cluster")
    server.stop(grace=0)
    client = RemoteTuner(f"127.0.0.1:{port}", key, retries=1, backoff=0.01, timeout=1)
    callback = ServiceCallback(client, "ray_source", outputs=["y"], task={"t": 0.8})

    class Trial:  # what Ray hands a callback
        def __init__(self, x: float) -> None:
            self.trial_id, self.config, self.last_result = f"trial_{x}", {"x": x}, {"y": x * x}

    callback.on_trial_complete(0, [], Trial(0.1))
    assert len(callback.unsent) == 1 and callback.sent == 0  # kept, not lost
    server = TuningServer(tmp_path / "repo", port=port)
    server.start()
    client.retries, client.backoff = 5, 0.2  # the channel reconnects within these
    try:
        callback.on_trial_complete(1, [], Trial(0.2))
        callback.on_experiment_end([])
        records = JsonStore(tmp_path / "repo").evaluations("ray_source")
        assert sorted(r.tuning_parameter["x"] for r in records) == [0.1, 0.2] and not callback.unsent
    finally:
        client.close()
        server.stop(grace=0)
