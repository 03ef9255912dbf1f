"""GPTune's own reader (``../shared/tools/gptune-reader``) over the files raytuner writes.

The tool runs GPTune's unmodified loading code (``HistoryDB.load_history_func_eval`` as ``GPTune.MLA_``
calls it, then ``read_surrogate_models``) and reports, as JSON, what it loaded, whether GPTune exited or
raised, and which stored models it found. Each test here writes a file the way users do and checks that
GPTune loads every successful record, does not stop, and finds the stored models. The tests skip where
the tool is not there (CI has it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from demo_runs import tune_demo
from repo_data import GPTUNE_DEMO

from raytuner.cli import main
from raytuner.engines import MLA, TLA2
from raytuner.models import GPTUNE_LCM, LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.models.persistence import load_surrogate
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo

TOOL = Path(__file__).resolve().parents[2] / "shared/tools/gptune-reader"
DATA = GPTUNE_DEMO.parent

pytestmark = pytest.mark.skipif(not (TOOL / "check.py").is_file(), reason=f"GPTune's reader tool is not in {TOOL}")


def gptune_reads(path: Path, problem: Path, *args: str) -> dict[str, Any]:
    """The tool's JSON report on ``path`` read by GPTune as ``problem`` declares it."""
    done = subprocess.run(
        [sys.executable, str(TOOL / "check.py"), str(path), "--problem", str(problem), "--json", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.strip(), done.stderr[-2000:]
    return json.loads(done.stdout)


def _successful_per_task(path: Path, names: list[str]) -> list[int]:
    """Successful records per task, in order of first appearance (the tool's order of tasks)."""
    counts: dict[str, int] = {}
    for record in json.loads(path.read_text())["func_eval"]:
        key = json.dumps([record["task_parameter"][n] for n in names])
        ok = (record.get("raytuner") or {}).get("status", "ok") == "ok"
        counts[key] = counts.get(key, 0) + ok
    return list(counts.values())


def _export(tmp_path: Path, name: str, problem: str) -> Path:
    """``history import`` then ``history export`` of a GPTune file in ``tests/data/gptune``, through the CLI."""
    store, out = tmp_path / "store", tmp_path / name
    for args in (
        ["history", "import", str(DATA / name), "--to", str(store)],
        ["history", "export", "--from", str(store), "--problem", problem, "--out", str(out)],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
    return out


def test_gptune_loads_an_mla_run_with_a_failure_and_finds_its_models(tmp_path: Path) -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    engine = MLA(
        problem,
        [{"t": 1.0}, {"t": 1.5}],
        seed=0,
        n_initial=3,
        lcm=LCMOptions(n_starts=1, **GPTUNE_LCM),
        executor=InlineExecutor(),
    )
    store = JsonStore(tmp_path)
    session = TuningSession(problem, engine, store, "mla-demo")
    for n in range(8):
        trial = session.ask()
        if n == 4:
            session.tell(trial, failure="segfault")
        else:
            session.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})
    store.compact("mla-demo")
    path = store.path("mla-demo")
    report = gptune_reads(path, TOOL / "examples/gptune-demo.json")
    assert report["nothing_exited_or_raised"], report["steps"]
    assert [t["loaded"] for t in report["func_eval"]["per_task"]] == _successful_per_task(path, ["t"])
    assert report["func_eval"]["loaded"] == 7
    models = report["surrogate_models"]
    assert models["by_modeler"] == {"Model_LCM": models["found"]} and models["found"] > 0


def test_gptune_loads_gptunes_demo_file_through_import_and_export(tmp_path: Path) -> None:
    path = _export(tmp_path, "GPTune-Demo.json", "GPTune-Demo")
    report = gptune_reads(path, TOOL / "examples/gptune-demo.json")
    assert report["pass"] and report["func_eval"]["loaded"] == report["func_eval"]["in_file"] == 70
    original = gptune_reads(DATA / "GPTune-Demo.json", TOOL / "examples/gptune-demo.json")
    assert report["surrogate_models"]["found"] == original["surrogate_models"]["found"]


def test_gptune_loads_an_early_2021_scalapack_file_through_import_and_export(tmp_path: Path) -> None:
    path = _export(tmp_path, "scalapack-pdqrdriver-2021.json", "scalapack-pdqrdriver")
    report = gptune_reads(path, TOOL / "examples/scalapack-pdgeqrf.json")
    assert report["pass"], report["steps"]
    assert report["func_eval"]["loaded"] == report["func_eval"]["in_file"] == 5


def test_gptunes_match_reads_the_transformers_of_imported_2020_models(tmp_path: Path) -> None:
    """Every record loads; the model lookup gets past ``transformer`` to GPTune's own limit: it reads
    ``lower_bound`` of a categorical entry, which neither GPTune's spaces nor its own stored models have."""
    path = _export(tmp_path, "hypre-2021.json", "hypre")
    legacy = json.loads((DATA / "hypre-2021.json").read_text())
    space, first = legacy["model_data"][0]["problem_space"], legacy["func_eval"][0]
    declared: dict[str, Any] = {"output_space": [{"name": "r", "type": "real"}]}
    for key, target, names in (("IS", "input_space", first["I"]), ("PS", "parameter_space", first["P"])):
        declared[target] = [
            {
                "name": n,
                **e,
                "type": {"int": "integer"}.get(e["type"], e["type"]),
                "transformer": "onehot" if e["type"] == "categorical" else "normalize",
            }
            for n, e in zip(names, space[key])
        ]
    (tmp_path / "hypre-problem.json").write_text(json.dumps(declared))
    report = gptune_reads(path, tmp_path / "hypre-problem.json")
    assert report["func_eval"]["loaded"] == report["func_eval"]["in_file"] == 10
    lookup = next(s for s in report["steps"] if s["step"].startswith("HistoryDB.read_surrogate_models"))
    assert lookup["outcome"] == "raised" and "'lower_bound'" in lookup["error"], lookup


def test_gptune_loads_a_tla2_history_and_leaves_its_source_models_to_raytuner(tmp_path: Path) -> None:
    """TLA2's models learned from source tasks the file does not hold: GPTune's rebuild would look their uids up
    in the file (``TypeError``), so they are ``raytuner_LCM`` (with the sources kept in the record), never found
    as GPTune's; raytuner rebuilds each from the store alone."""
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    sources = [FunctionEvaluation.create({"t": t}, {"x": x}, {"y": demo(x, t)}) for t in (1.0, 2.0) for x in (0.2, 0.6)]
    engine = TLA2(
        problem,
        {"t": 1.5},
        sources,
        seed=0,
        n_initial=2,
        lcm=LCMOptions(n_starts=1, **GPTUNE_LCM),
        executor=InlineExecutor(),
    )
    store = tune_demo(problem, engine, JsonStore(tmp_path), "tla2-demo", 4)
    report = gptune_reads(store.path("tla2-demo"), TOOL / "examples/gptune-demo.json")
    assert report["pass"], report["steps"]
    assert report["func_eval"]["loaded"] == 4 and report["surrogate_models"]["found"] == 0
    models = store.models("tla2-demo")
    assert models and {m.modeler for m in models} == {"raytuner_LCM"}
    assert all(load_surrogate(m, store.evaluations("tla2-demo")).data.counts[:2] == [2, 2] for m in models)
