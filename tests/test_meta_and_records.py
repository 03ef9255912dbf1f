"""Meta descriptions, records and environment capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from record_helpers import known, provenance
from repo_data import GPTUNE_DEMO

from raytuner.errors import InvalidInputError
from raytuner.problem.environment import (
    cpu_model,
    describe_machine,
    machine_configuration,
    machine_details,
    software_configuration,
    version_entry,
)
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, Provenance

DEMO_FILE = GPTUNE_DEMO

# The meta description of GPTuneCrowd's paper (section IV-A), written as JSON.
PAPER_META = {
    "api_key": "your_api_key",
    "tuning_problem_name": "my_example",
    "problem_space": {
        "input_space": [{"name": "t", "type": "integer", "lower_bound": 1, "upper_bound": 10}],
        "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 10}],
        "output_space": [{"name": "y", "type": "real"}],
    },
    "configuration_space": {
        "machine_configurations": [{"Cori": {"haswell": {"nodes": 1, "cores": 32}}}],
        "software_configurations": [{"gcc": {"version_from": [8, 0, 0], "version_to": [9, 0, 0]}}],
        "user_configurations": ["user_A", "user_B"],
    },
    "machine_configuration": {"machine_name": "Cori", "slurm": "yes"},
    "software_configuration": {"spack": "ScaLAPACK"},
    "sync_crowd_repo": "yes",
}


def test_paper_meta_description_parses_and_round_trips(tmp_path: Path) -> None:
    meta = MetaDescription.parse(PAPER_META)
    assert meta.tuning_problem_name == "my_example"
    assert meta.problem_space.input_space["t"].type == "integer"
    assert meta.configuration_space.machine_configurations[0]["Cori"]["haswell"].cores == 32
    assert meta.configuration_space.software_configurations[0]["gcc"].contains([8, 5, 0])
    assert not meta.configuration_space.software_configurations[0]["gcc"].contains([10, 0, 0])
    assert meta.sync_crowd_repo is True
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(meta.to_dict()))
    again = MetaDescription.load(path)
    assert again == meta
    assert again.to_dict() == meta.to_dict()
    assert again.to_dict()["sync_crowd_repo"] == "yes"


def test_api_key_never_shows_in_repr() -> None:
    meta = MetaDescription.parse(PAPER_META)
    assert "your_api_key" not in repr(meta) and "your_api_key" not in str(meta)
    assert meta.to_dict()["api_key"] == "your_api_key"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sync_crowd_repo": "maybe"}, "sync_crowd_repo"),
        ({"tuning_problem_name": "has space"}, "tuning_problem_name"),
        ({"surprise": 1}, "surprise"),
        (
            {"configuration_space": {"software_configurations": [{"gcc": {"version_from": "8"}}]}},
            "configuration_space.software_configurations[0].gcc.version_from",
        ),
    ],
)
def test_bad_meta_descriptions_name_the_field(change: dict, field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        MetaDescription.parse({**PAPER_META, **change})
    assert info.value.field.startswith(field)


def test_gptune_demo_file_reads_and_writes_back_identically() -> None:
    raw = json.loads(DEMO_FILE.read_text())
    document = HistoryDocument.model_validate(raw)
    assert len(document.func_eval) == 70 and len(document.surrogate_model) == 35
    assert document.to_dict() == raw
    assert all(r.status == "ok" for r in document.func_eval)  # GPTune's own records carry no provenance


def test_records_keep_provenance_under_an_extra_key() -> None:
    record = FunctionEvaluation.create(
        {"t": 1.0},
        {"x": 0.5},
        {"y": 2.0},
        provenance=Provenance(engine="band", fidelity=9, cost=1 / 3, bracket=1, rung=0, pass_=2, trial_id="abc"),
    )
    data = record.to_dict()
    assert data["raytuner"] == {
        "status": "ok",
        "fidelity": 9.0,
        "cost": 1 / 3,
        "bracket": 1,
        "rung": 0,
        "pass": 2,
        "engine": "band",
        "trial_id": "abc",
    }
    assert data["evaluation_result"] == {"y": 2.0} and data["modeling"] == "band"
    assert set(data["time"]) >= {
        "tm_year",
        "tm_mon",
        "tm_mday",
        "tm_hour",
        "tm_min",
        "tm_sec",
        "tm_wday",
        "tm_yday",
        "tm_isdst",
    }
    assert FunctionEvaluation.model_validate(json.loads(json.dumps(data))) == record


@pytest.mark.parametrize(
    ("result", "failure", "message"),
    [
        ({"y": float("nan")}, None, "non-finite output y=nan"),
        ({"y": float("inf")}, None, "non-finite output y=inf"),
        (None, None, "no output reported"),
        ({"y": 1.0}, "compile error", "compile error"),
    ],
)
def test_failed_evaluations_are_records_with_a_message(
    result: dict[str, float] | None, failure: str | None, message: str
) -> None:
    record = FunctionEvaluation.create({"t": 1}, {"x": 0.1}, result, failure=failure, outputs=["y"])
    assert record.status == "failed" and record.evaluation_result == {"y": None}, "GPTune writes a failure as null"
    assert record.raytuner is not None and record.raytuner.failure_message == message
    assert record.value("y") is None


def test_machine_configuration_reads_slurm_and_user_values_win() -> None:
    env = {
        "SLURM_CLUSTER_NAME": "perlmutter",
        "SLURM_JOB_NUM_NODES": "4",
        "SLURM_CPUS_ON_NODE": "128",
        "SLURM_JOB_ID": "123456",
    }
    machine = machine_configuration(env=env)
    assert machine["machine_name"] == "perlmutter"
    processors = [v for v in machine.values() if isinstance(v, dict) and "nodes" in v]
    assert processors == [{"nodes": 4, "cores": 128}]
    assert len(machine) == 2, "GPTune's shape: machine_name and one processor, nothing else"
    assert machine_details(env=env)["slurm_environment"]["SLURM_JOB_ID"] == "123456"
    assert machine_configuration({"machine_name": "cori"}, env=env)["machine_name"] == "cori"
    given = {"machine_name": "cori", "haswell": {"nodes": 8, "cores": 32}, "slurm": "yes"}
    assert machine_configuration(given, env=env) == {"machine_name": "cori", "haswell": {"nodes": 8, "cores": 32}}
    assert machine_details(given, env=env)["slurm"] == "yes"
    local = machine_configuration(env={})
    assert "slurm" not in local and local["machine_name"] == machine_details(env={})["host"]


def test_a_record_keeps_gptunes_machine_shape_and_the_rest_under_raytuner() -> None:
    record = FunctionEvaluation.create(
        {"t": 1}, {"x": 0.5}, {"y": 1.0}, machine_configuration=describe_machine({"machine_name": "m"}, env={})
    )
    assert set(record.machine_configuration) == {"machine_name", cpu_model()}
    machine = known(provenance(record).machine)
    assert machine["host"] and machine["cpu_model"] == cpu_model()


def test_software_configuration_has_versions_and_user_values_win() -> None:
    software = software_configuration(["pydantic", "no-such-package-xyz"], user={"numpy": {"version_str": "9"}})
    assert {"python", "numpy", "scipy", "GPy", "ray", "pydantic"} <= set(software)
    assert "no-such-package-xyz" not in software
    assert software["numpy"]["version_str"] == "9"
    assert software["pydantic"]["version_split"][0] >= 2
    assert version_entry("1.15.0.post1") == {"version_str": "1.15.0.post1", "version_split": [1, 15, 0]}
