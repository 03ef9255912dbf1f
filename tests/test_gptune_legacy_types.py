"""A 2020-schema GPTune file read without the problem: each parameter gets one type, said in one line.

GPTune's 2020 files write every parameter value as a string. GPTune's load
check keeps a categorical value only if it is one of the category strings
(``value in categories``), so a categorical must stay a string through
``history import`` and ``history export``; integers and reals become numbers.
The fixtures are written here, in the 2020 schema (records keyed ``I``, ``P``, ``O``).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from raytuner.problem.space import ProblemSpace
from raytuner.store.gptune_file import parse_history
from raytuner.store.gptune_types import InferredType, infer_types

_MACHINE = {"machine": "cori", "type": "haswell", "nodes": 1, "cores": 32}


def _record(i: int, task: dict[str, Any], params: dict[str, str], r: float) -> dict[str, Any]:
    return {
        "I": task,
        "P": params,
        "O": {"r": r},
        "machine_deps": _MACHINE,
        "compile_deps": {},
        "runtime_deps": {},
        "uid": f"00000000-0000-4000-8000-{i:012d}",
    }


def _declared_file() -> dict[str, Any]:
    """As GPTune wrote hypre in 2020: categorical values are numeric strings, declared by model_data's PS."""
    rows = [("3", "0.46", "1", "-1"), ("24", "0.77", "10", "18"), ("6", "0.8", "0", "6")]
    records = [
        _record(i, {"nx": 200}, {"Px": px, "tol": tol, "coarsen_type": coarsen, "relax_type": relax}, 10.0 + i)
        for i, (px, tol, coarsen, relax) in enumerate(rows)
    ]
    space = {
        "IS": [{"type": "int", "lower_bound": 20, "upper_bound": 1024}],
        "PS": [
            {"type": "int", "lower_bound": 1, "upper_bound": 31},
            {"type": "real", "lower_bound": 0, "upper_bound": 1},
            {"type": "categorical", "categories": ["0", "1", "2", "10"]},
            {"type": "categorical", "categories": ["-1", "6", "18"]},
        ],
        "OS": [{"type": "real", "lower_bound": float("-inf"), "upper_bound": float("inf")}],
    }
    model = {
        "hyperparameters": [1.0] * 6,
        "model_stats": {},
        "iteration": 1,
        "func_eval": [r["uid"] for r in records],
        "task_parameters": [[200]],
        "problem_space": space,
    }
    return {"name": "hypre2020", "model_data": [model], "func_eval": records}


def _undeclared_file() -> dict[str, Any]:
    """No model spaces: a solver name (no number), whole numbers, and a parameter with a fraction."""
    rows = [("cg", "4", "1"), ("3", "8", "0.5"), ("gmres", "16", "2")]
    return {
        "name": "solvers",
        "model_data": [],
        "func_eval": [
            _record(i, {"n": str(100 * (i + 1))}, {"solver": solver, "block": block, "omega": omega}, 1.0 + i)
            for i, (solver, block, omega) in enumerate(rows)
        ],
    }


def _inference_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "typed by inference" in r.getMessage()
    ]


def test_declared_categories_stay_strings_and_one_warning_names_every_type(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        document = parse_history(_declared_file())
    values = [r.tuning_parameter for r in document.func_eval]
    assert values[0] == {"Px": 3, "tol": 0.46, "coarsen_type": "1", "relax_type": "-1"}
    assert [v["coarsen_type"] for v in values] == ["1", "10", "0"]
    assert all(type(v["Px"]) is int and type(v["tol"]) is float for v in values)
    assert document.func_eval[0].task_parameter == {"nx": 200}  # not written as a string: kept
    note = (
        "values written as strings were typed by inference (no problem given; 4 of 4 as the file's "
        "model_data declares; --meta sets them): Px integer, tol real, coarsen_type categorical 0|1|2|10, "
        "relax_type categorical -1|6|18"
    )
    assert document.read_report.notes == [note]
    warnings = _inference_warnings(caplog)
    assert len(warnings) == 1 and warnings[0].endswith(note) and "\n" not in warnings[0]


def test_without_model_spaces_a_value_that_is_no_number_makes_the_parameter_categorical() -> None:
    types = infer_types(_undeclared_file())
    assert types == {
        "n": InferredType("integer"),
        "solver": InferredType("categorical", ("cg", "3", "gmres")),
        "block": InferredType("integer"),
        "omega": InferredType("real"),
    }
    document = parse_history(_undeclared_file())
    assert [r.tuning_parameter for r in document.func_eval] == [
        {"solver": "cg", "block": 4, "omega": 1.0},
        {"solver": "3", "block": 8, "omega": 0.5},
        {"solver": "gmres", "block": 16, "omega": 2.0},
    ]
    assert [r.task_parameter for r in document.func_eval] == [{"n": 100}, {"n": 200}, {"n": 300}]
    assert document.read_report.notes[-1].endswith(
        "(no problem given; 0 of 4 as the file's model_data declares; --meta sets them): "
        "n integer, solver categorical cg|3|gmres, block integer, omega real"
    )


def test_a_declared_type_the_values_do_not_fit_is_inferred_from_the_values() -> None:
    data = _declared_file()
    data["func_eval"][1]["P"]["Px"] = "auto"
    data["func_eval"][2]["P"]["tol"] = "1"
    types = infer_types(data)
    assert types["Px"] == InferredType("categorical", ("3", "auto", "6"))
    assert types["tol"] == InferredType("real", (), declared=True)
    assert parse_history(data).func_eval[2].tuning_parameter["tol"] == 1.0


def test_only_what_the_problem_does_not_type_is_inferred() -> None:
    problem = ProblemSpace.parse(
        {
            "input_space": [{"name": "nx", "type": "integer", "lower_bound": 20, "upper_bound": 1024}],
            "parameter_space": [
                {"name": "Px", "type": "integer", "lower_bound": 1, "upper_bound": 31},
                {"name": "tol", "type": "real", "lower_bound": 0, "upper_bound": 1},
                {"name": "coarsen_type", "type": "categorical", "categories": ["0", "1", "2", "10"]},
            ],
            "output_space": [{"name": "r"}],
        }
    )
    document = parse_history(_declared_file(), problem)
    assert document.func_eval[0].tuning_parameter == {"Px": 3, "tol": 0.46, "coarsen_type": "1", "relax_type": "-1"}
    assert document.read_report.notes[0] == (
        "values written as strings were typed by inference (not in the problem; 1 of 1 as the file's "
        "model_data declares; --meta sets them): relax_type categorical -1|6|18"
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raytuner.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_import_without_meta_says_the_types_in_one_line_and_export_writes_categories_as_strings(tmp_path: Path) -> None:
    source = tmp_path / "hypre2020.json"
    source.write_text(json.dumps(_declared_file()))
    imported = _cli("history", "import", str(source), "--to", str(tmp_path / "store"))
    assert imported.returncode == 0, imported.stderr
    store = tmp_path / "store"
    assert imported.stdout.strip() == f"imported 3 new evaluations and 1 new models of hypre2020 into {store}"
    said = [line for line in imported.stderr.splitlines() if "typed by inference" in line]
    assert said == [
        (
            "WARNING raytuner.store.gptune_schemas: GPTune history (schema 4): values written as strings "
            "were typed by inference (no problem given; 4 of 4 as the file's model_data declares; "
            "--meta sets them): Px integer, tol real, coarsen_type categorical 0|1|2|10, "
            "relax_type categorical -1|6|18"
        )
    ]
    out = tmp_path / "out.json"
    exported = _cli("history", "export", "--from", str(store), "--problem", "hypre2020", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    records = sorted(json.loads(out.read_text())["func_eval"], key=lambda r: r["uid"])
    assert [r["tuning_parameter"] for r in records] == [
        {"Px": 3, "tol": 0.46, "coarsen_type": "1", "relax_type": "-1"},
        {"Px": 24, "tol": 0.77, "coarsen_type": "10", "relax_type": "18"},
        {"Px": 6, "tol": 0.8, "coarsen_type": "0", "relax_type": "6"},
    ]
    assert "typed by inference" not in exported.stderr  # today's schema: nothing to infer
