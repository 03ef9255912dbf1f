"""``import raytuner as rt``: every public name, imported lazily, and a two-task hello world with it alone."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import raytuner as rt


def test_every_public_name_is_its_home_modules_object() -> None:
    tree = ast.parse(Path(rt.__file__).read_text())
    checked = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    typed = {
        alias.asname: (node.module, alias.name)
        for node in checked.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    # what type checkers see is what runs: each name re-exported ("X as X") from its home
    assert typed == {name: (home, name) for name, home in rt._HOMES.items()}
    for name, home in rt._HOMES.items():
        assert getattr(rt, name) is getattr(importlib.import_module(home), name), name
    assert set(rt._HOMES) <= set(dir(rt))


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        rt.NoSuchThing  # noqa: B018 - the lookup is the test
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("rt.NoSuchThing did not raise")


def test_import_raytuner_loads_neither_ray_nor_grpc() -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "import raytuner\n"
        "print(time.perf_counter() - t)\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'grpc', 'numpy', 'pymongo'})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    seconds, loaded = done.stdout.splitlines()
    assert loaded == "" and float(seconds) < 1.0, done.stdout


def test_the_clients_load_without_the_crowd_repositorys_server_side() -> None:
    """The gRPC clients sign with raytuner.signing: neither pymongo nor the crowd repository comes with them."""
    code = (
        "import sys\n"
        "from raytuner.client import CrowdClient, RemoteSource, RemoteTuner\n"
        "import raytuner.client.crowd_sources\n"
        "print(' '.join(sorted({'pymongo', 'raytuner.crowd.repository'} & set(sys.modules))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "", done.stdout


def test_the_signing_codes_old_path_still_imports() -> None:
    from raytuner import signing
    from raytuner.crowd.signatures import Signer, __all__

    assert Signer is signing.Signer and __all__ == signing.__all__


def test_a_two_task_hello_world_needs_only_rt(tmp_path: Path) -> None:
    problem = rt.ProblemSpace.parse(
        {
            "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 2}],
            "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "output_space": [{"name": "y", "goal": "minimize"}],
        }
    )
    tasks = [{"t": 0.5}, {"t": 1.5}]
    store = rt.JsonStore(tmp_path)
    session = rt.TuningSession(problem, rt.MLA(problem, tasks, seed=0, n_initial=3), store, "hello")
    for _ in range(8):
        trial = session.ask()
        session.tell(trial, {"y": (trial.config["x"] - trial.task["t"] / 2) ** 2})
    store.close()
    records = rt.load_history(tmp_path, "hello").records
    assert len(records) == 8
    for task, best in zip(tasks, session.best_per_task(), strict=True):  # the lowest y of each task's records
        mine = [r.evaluation_result["y"] for r in records if r.task_parameter == task]
        assert best is not None and best.task_parameter == task and best.evaluation_result["y"] == min(mine)
        assert session.best(task) == best


def test_names_stored_before_the_engine_was_so_named_still_load() -> None:
    """Records and service sessions written when the engine was a strategy and the proposer a source read as they were."""
    from raytuner.problem.records import Provenance
    from raytuner.service.sessions import SessionSpec

    record = rt.FunctionEvaluation.model_validate(
        {
            "task_parameter": {"t": 1.0},
            "tuning_parameter": {"x": 0.5},
            "evaluation_result": {"y": 2.0},
            "raytuner": {"strategy": "mla", "source": "model", "fidelity": 1.0},
        }
    )
    assert record.raytuner is not None and (record.raytuner.engine, record.raytuner.proposer) == ("mla", "model")
    written = record.to_dict()["raytuner"]
    assert {"engine", "proposer"} <= set(written) and not {"strategy", "source"} & set(written)
    assert Provenance(strategy="random").engine == "random" == Provenance(engine="random").engine
    old = {"session_id": "s", "owner": "u", "problem_name": "p", "meta": {}, "strategy": "band", "options": {}}
    spec = SessionSpec.from_document({**old, "tasks": [{"t": 1.0}], "seed": 0})
    assert spec.engine == "band"
