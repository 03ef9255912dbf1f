"""The crowd repository over gRPC, end to end: a real server, a real mongod, CrowdClient and the CLI."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from raytuner.analysis.surrogate import SurrogateModel
from raytuner.cli import main
from raytuner.client import crowd as crowdtune
from raytuner.client.crowd import CrowdClient
from raytuner.client.remote import ServiceError
from raytuner.crowd import CrowdRepository
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace
from raytuner.service.server import TuningServer
from raytuner.test_problems import ISHIGAMI_PROBLEM, ishigami

PROBLEM = "ishigami"
PROBLEM_SPACE = {
    **ISHIGAMI_PROBLEM,
    "input_space": [{"name": "a", "type": "real", "lower_bound": 1, "upper_bound": 10}],
}


def records(n: int, seed: int = 0) -> list[FunctionEvaluation]:
    problem = ProblemSpace.parse(PROBLEM_SPACE)
    configs = sample_configurations(problem, {"a": 7.0}, n, seed=seed)
    return [
        FunctionEvaluation.create(
            {"a": 7.0}, c, {"y": ishigami(c)}, machine_configuration={"machine_name": "cori", "haswell": {"nodes": 1}}
        )
        for c in configs
    ]


def test_upload_query_predict_and_sobol_through_the_server(crowd: tuple[TuningServer, CrowdRepository, str]) -> None:
    server, repository, _ = crowd
    repository.add_user("alice", "alice@example.org", ["hpc"])
    repository.add_user("bob", "bob@example.org")
    repository.add_machine("Cori", ["cori", "cori.nersc.gov"])
    alice, bob = repository.create_key("alice"), repository.create_key("bob")
    data = records(300)
    with CrowdClient(server.address, alice, timeout=120) as client:
        assert client.upload(PROBLEM, data[:250], access="public") == (250, 0)
        assert client.upload(PROBLEM, data[200:], access="private") == (50, 50)  # idempotent by uid
        found = client.query_function_evaluations(
            PROBLEM,
            {"input_space": [{"name": "a", "type": "real", "lower_bound": 6, "upper_bound": 8}]},
            {"machine_configurations": [{"cori.nersc.gov": {"haswell": {"nodes": 1}}}]},
        )
        assert len(found) == 300
        assert {r.machine_configuration.get("machine_name") for r in found} == {"Cori"}
        model = client.query_surrogate_model(PROBLEM, PROBLEM_SPACE)
        assert isinstance(model, SurrogateModel)
        points = [{"x1": 0.3, "x2": -1.0, "x3": 2.0}, {"x1": -2.0, "x2": 0.5, "x3": 0.0}]
        local_mean, _ = model.predict(points)
        remote = client.query_predict_output(PROBLEM, PROBLEM_SPACE, points, task={"a": 7.0})
        assert np.allclose([p["mean"] for p in remote], local_mean, atol=1e-6)
        assert np.allclose(local_mean, [ishigami(p) for p in points], atol=0.5)
        result = client.query_sensitivity_analysis(PROBLEM, PROBLEM_SPACE, {"a": 7.0}, num_samples=1024)
    assert result.S1["x2"] == pytest.approx(0.442, abs=0.08)
    assert result.ST["x3"] == pytest.approx(0.244, abs=0.08)
    with CrowdClient(server.address, bob) as client:  # alice's private 50 stay hers
        assert len(client.query_function_evaluations(PROBLEM)) == 250


def test_a_query_chooses_one_lcm_over_every_task_or_one_gp_per_task(
    crowd: tuple[TuningServer, CrowdRepository, str],
) -> None:
    server, repository, _ = crowd
    repository.add_user("alice", "alice@example.org")
    key = repository.create_key("alice")
    problem = ProblemSpace.parse(PROBLEM_SPACE)
    other = [
        FunctionEvaluation.create({"a": 3.0}, c, {"y": ishigami(c, a=3.0)})
        for c in sample_configurations(problem, {"a": 3.0}, 20, seed=5)
    ]
    points = [{"x1": 0.3, "x2": -1.0, "x3": 2.0}]
    with CrowdClient(server.address, key, timeout=120) as client:
        client.upload(PROBLEM, records(20) + other)
        lcm = client.query_surrogate_model(PROBLEM, PROBLEM_SPACE, task={"a": 7.0})
        gp = client.query_surrogate_model(PROBLEM, PROBLEM_SPACE, task={"a": 7.0}, modeler="GP")
        assert len(lcm.tasks) == 2 and gp.tasks == [{"a": 7.0}]
        remote = client.query_predict_output(PROBLEM, PROBLEM_SPACE, points, task={"a": 7.0}, modeler="GP")
        assert remote[0]["mean"] == pytest.approx(float(gp.predict(points)[0][0]), abs=1e-6)
        with pytest.raises(ServiceError) as info:
            client.query_predict_output(PROBLEM, PROBLEM_SPACE, points, task={"a": 7.0}, modeler="RF")
    assert info.value.code == "INVALID_ARGUMENT" and info.value.message.startswith("modeler: ")


def test_the_crowdtune_functions_are_the_client_methods_with_the_key_first(
    crowd: tuple[TuningServer, CrowdRepository, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, repository, _ = crowd
    repository.add_user("alice", "alice@example.org")
    key = repository.create_key("alice")
    with CrowdClient(server.address, key) as client:
        client.upload(PROBLEM, records(40))
    # server= is not in the type a ParamSpec gives the function (see _crowdtune); it is in its signature
    found = crowdtune.query_function_evaluations(key, PROBLEM, limit=5, server=server.address)  # type: ignore[call-arg]
    assert len(found) == 5  # limit, the method's, which the hand-written function lacked
    monkeypatch.setenv("RAYTUNER_SERVER", server.address)
    assert len(crowdtune.query_function_evaluations(key, PROBLEM)) == 40
    point = {"x1": 0.3, "x2": -1.0, "x3": 2.0}
    [predicted] = crowdtune.query_predict_output(key, PROBLEM, PROBLEM_SPACE, [point], task={"a": 7.0})
    assert set(predicted) == {"mean", "variance"}
    for name in ("query_function_evaluations", "query_surrogate_model", "query_predict_output"):
        function, method = getattr(crowdtune, name), getattr(CrowdClient, name)
        names = list(inspect.signature(function).parameters)
        assert names == ["api_key", *list(inspect.signature(method).parameters)[1:], "server"]
        assert "    api_key: " in (function.__doc__ or "") and "    server: " in (function.__doc__ or "")


def test_errors_have_their_status(crowd: tuple[TuningServer, CrowdRepository, str]) -> None:
    server, repository, _ = crowd
    repository.add_user("alice", "alice@example.org")
    key = repository.create_key("alice")
    with CrowdClient(server.address, "rt_0000000000000000_wrong", retries=0) as client:
        with pytest.raises(ServiceError) as info:
            client.query_function_evaluations(PROBLEM)
        assert info.value.code == "UNAUTHENTICATED"
        assert "wrong" not in info.value.message
    with CrowdClient(server.address, key, retries=0) as client:
        with pytest.raises(ServiceError) as info:
            client.query_function_evaluations(PROBLEM, {"input_space": [{"name": {"$gt": ""}}]})
        assert info.value.code == "INVALID_ARGUMENT"
        with pytest.raises(ServiceError) as info:
            client.upload(PROBLEM, records(2), access="everyone")
        assert info.value.code == "INVALID_ARGUMENT" and "access" in info.value.message
        with pytest.raises(ServiceError) as info:
            client.query_sensitivity_analysis(PROBLEM, PROBLEM_SPACE, {"a": 7.0}, num_samples=1000)
        assert info.value.code == "INVALID_ARGUMENT" and info.value.message.startswith("num_samples: ")
        # a point or a task outside the spaces is refused before anything is read or fitted
        with pytest.raises(ServiceError) as info:
            client.query_predict_output(PROBLEM, PROBLEM_SPACE, [{"x1": 0.3, "x2": -1.0}], task={"a": 7.0})
        assert info.value.code == "INVALID_ARGUMENT" and info.value.message.startswith("parameters_json")
        with pytest.raises(ServiceError) as info:
            client.query_predict_output(PROBLEM, PROBLEM_SPACE, [{"x1": 0.3, "x2": -1.0, "x3": 2.0}], task={"b": 7.0})
        assert info.value.code == "INVALID_ARGUMENT" and info.value.message.startswith("task_json")


def test_the_crowd_commands(crowd: tuple[TuningServer, CrowdRepository, str], tmp_path: Path) -> None:
    server, _, uri = crowd
    runner = CliRunner()

    def run(*args: str, **env: str) -> Any:
        result = runner.invoke(
            main, ["crowd", *args], env={"RAYTUNER_CROWD_MONGODB": uri, "RAYTUNER_SERVER": server.address, **env}
        )
        assert result.exit_code == 0, result.output
        return result.output

    run("users", "add", "--username", "carol", "--email", "carol@example.org", "--group", "ml")
    key = run("keys", "create", "--username", "carol").strip()
    assert key.startswith("rt_")
    history = tmp_path / f"{PROBLEM}.json"
    history.write_text(json.dumps({"func_eval": [r.to_dict() for r in records(64, seed=1)]}))
    assert "64 records stored" in run("upload", str(history), RAYTUNER_CROWD_API_KEY=key)
    space = tmp_path / "meta.json"
    space.write_text(json.dumps({"tuning_problem_name": PROBLEM, "problem_space": PROBLEM_SPACE}))
    out = run("query", "--problem", PROBLEM, "--json", RAYTUNER_CROWD_API_KEY=key)
    assert len(json.loads(out)) == 64
    # an upload is private unless asked otherwise: another user sees none of carol's records, then the public ones
    run("users", "add", "--username", "dave", "--email", "dave@example.org", "--group", "ml")
    dave = run("keys", "create", "--username", "dave").strip()
    assert json.loads(run("query", "--problem", PROBLEM, "--json", RAYTUNER_CROWD_API_KEY=dave)) == []
    public = tmp_path / "public.json"
    public.write_text(json.dumps({"func_eval": [r.to_dict() for r in records(3, seed=2)]}))
    assert "3 records stored" in run(
        "upload", str(public), "--problem", PROBLEM, "--access", "public", RAYTUNER_CROWD_API_KEY=key
    )
    assert len(json.loads(run("query", "--problem", PROBLEM, "--json", RAYTUNER_CROWD_API_KEY=dave))) == 3
    assert len(json.loads(run("query", "--problem", PROBLEM, "--json", RAYTUNER_CROWD_API_KEY=key))) == 67
    out = run(
        "sensitivity",
        "--problem",
        PROBLEM,
        "--problem-space",
        f"@{space}",
        "--task",
        "a=7",
        "--num-samples",
        "256",
        RAYTUNER_CROWD_API_KEY=key,
    )
    assert out.splitlines()[0].split()[:4] == ["Parameter", "Type", "Range", "S1"]
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["x1", "x2", "x3"]
    key_id = key.split("_")[1]
    run("keys", "revoke", "--key-id", key_id)
    result = runner.invoke(
        main,
        ["crowd", "query", "--problem", PROBLEM],
        env={"RAYTUNER_SERVER": server.address, "RAYTUNER_CROWD_API_KEY": key},
    )
    assert result.exit_code != 0 and "UNAUTHENTICATED" in result.output
