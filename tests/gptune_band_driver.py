"""GPTune's band driver over a history file: ``GPTune_MB.MB_LCM`` as GPTune-Demo's ``demo_MB.py`` runs it.

Run by ``tests/test_gptune_band_driver.py`` in a subprocess whose ``PYTHONPATH`` holds GPTune's GPTuneBand
code (``../shared/tools/gptune-tuner``, ``pythonpath.sh band``) and the reader's ``lhsmdu`` stand-in, which
raises if GPTune samples. In a temporary folder it writes ``.gptune/meta.json`` (the file's machines loadable)
and copies FILE to ``gptune.db/<tuning_problem_name>.json``, builds GPTune-Demo's problem (``t`` in [0, 10],
``x`` in [0, 1], ``y``) with ``budget_min``, ``budget_max`` and ``budget_base`` set, and runs ``MB_LCM`` over
the given tasks and loops. The objective raises: a band driver that loads the history whole evaluates nothing.
It prints one JSON object: ``error`` (what GPTune raised, or ``null``), ``calls`` (what GPTune asked to
evaluate) and, per task, GPTune's configurations and values at ``budget_max`` (``per_task``).

Usage: ``python gptune_band_driver.py FILE --tasks 1.0 1.5 --loops 2 --b-min 1 --b-max 4 --eta 4``
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import shutil
import sys
import tempfile
import traceback
from typing import Any


def _loadable(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every machine, processor, node and core count of the file's records, as meta.json lists them."""
    machines: dict[str, Any] = {}
    for record in records:
        machine = dict(record.get("machine_configuration") or {})
        name = machine.pop("machine_name", None)
        for processor, counts in machine.items():
            listed = machines.setdefault(name, {}).setdefault(processor, {"nodes": [], "cores": []})
            for key in ("nodes", "cores"):
                if counts[key] not in listed[key]:
                    listed[key].append(counts[key])
    return machines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--tasks", type=float, nargs="+", required=True)
    parser.add_argument("--loops", type=int, required=True)
    parser.add_argument("--b-min", type=float, required=True)
    parser.add_argument("--b-max", type=float, required=True)
    parser.add_argument("--eta", type=int, required=True)
    args = parser.parse_args()
    history = json.load(open(args.file))
    name = history["tuning_problem_name"]
    work = tempfile.mkdtemp(prefix="gptune-band-")
    report: dict[str, Any] = {"error": None, "calls": [], "per_task": []}
    try:
        os.makedirs(os.path.join(work, ".gptune"))
        os.makedirs(os.path.join(work, "gptune.db"))
        shutil.copy(args.file, os.path.join(work, "gptune.db", f"{name}.json"))
        machines = _loadable(history["func_eval"])
        machine = next(iter(machines))
        processor = next(iter(machines[machine]))
        meta = {
            "tuning_problem_name": name,
            "machine_configuration": {"machine_name": machine, processor: {"nodes": 1, "cores": 2}},
            "software_configuration": {},
            "loadable_machine_configurations": machines,
            "loadable_software_configurations": {},
        }
        with open(os.path.join(work, ".gptune", "meta.json"), "w") as out:
            json.dump(meta, out)
        os.chdir(work)
        _run(args, report)
    except BaseException as exc:  # GPTune calls exit(); report whatever ended it
        frames = traceback.extract_tb(exc.__traceback__)
        where = next((f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}" for f in reversed(frames)), "")
        report["error"] = f"{type(exc).__name__}: {exc} at {where}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(json.dumps(report) + "\n")


def _run(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Run ``MB_LCM``, putting what GPTune asked to evaluate and its results at ``budget_max`` in ``report``."""
    space = importlib.import_module("autotune.space")
    autotune_problem = importlib.import_module("autotune.problem")
    gptune = importlib.import_module("GPTune.gptune")
    calls: list[dict[str, float]] = report["calls"]

    def objective(point: dict[str, Any]) -> list[float]:
        calls.append({k: float(v) for k, v in point.items()})
        raise RuntimeError(f"GPTune evaluated {point}: not in the history")

    # demo_MB.py's problem, computer and options (-optimization GPTuneBand)
    problem = autotune_problem.TuningProblem(
        space.Space([space.Real(0.0, 10.0, transform="normalize", name="t")]),
        space.Space([space.Real(0.0, 1.0, transform="normalize", name="x")]),
        space.Space([space.Real(float("-Inf"), float("Inf"), name="y")]),
        objective,
        {"cst1": "x >= 0. and x <= 1."},
        None,
    )
    computer = gptune.Computer(nodes=1, cores=2, hosts=None)
    options = gptune.Options()
    for key, value in {
        "model_restarts": 1,
        "distributed_memory_parallelism": False,
        "shared_memory_parallelism": False,
        "objective_evaluation_parallelism": False,
        "objective_multisample_threads": 1,
        "objective_multisample_processes": 1,
        "objective_nprocmax": 1,
        "model_processes": 1,
        "model_class": "Model_GPy_LCM",
        "verbose": False,
    }.items():
        options[key] = value
    options.validate(computer=computer)
    options["budget_min"], options["budget_max"], options["budget_base"] = args.b_min, args.b_max, args.eta
    # the global MB_LCM's first print reads (demo_MB.py defines it); a module attribute mypy does not know
    setattr(gptune, "NS", args.loops)  # noqa: B010
    band = gptune.GPTune_MB(problem, computer=computer, options=options)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            data, _, _ = band.MB_LCM(NLOOP=args.loops, Tgiven=[[t] for t in args.tasks])
    finally:
        sys.stderr.write(printed.getvalue()[-4000:])
    report["per_task"] = [
        {
            "t": t,
            "x": [float(p[0]) for p in data.P[i]],
            "y": [float(v) for v in list(data.O[i].ravel())],
        }
        for i, t in enumerate(args.tasks)
    ]


if __name__ == "__main__":
    main()
