"""The TLA benchmark's cross-machine case: dedispersion measured on an A100, tuned on a Radeon PRO W7800.

The source is ``source_samples`` random configurations of the A100's Kernel
Tuner cache (:mod:`benchmarks.kernel_cache`), recorded with
``machine_configuration={"machine_name": "A100"}``; the target is the same
kernel and search space on the W7800 (records with ``"W7800"``), whose
cached time is the objective and whose failed configurations are failed
evaluations. The TLA engines search the valid configurations only
(``candidates``); NoTLA (single-task MLA, which takes no candidate list) gets
the problem with a constraint that only stored configurations satisfy, and
any suggestion outside the valid space would be told as a failed
evaluation "outside the valid space" and counted. For reference the run
also counts how many such suggestions MLA makes *without* the constraint.

Example (about 3 minutes on 2 cores with every tuner and 2 seeds)::

    from benchmarks.tla_drive import QUICK
    raw = run_cross_machine(QUICK)
    raw["optimum"], sorted(raw["traces"])      # 50.36..., ['Ensemble(prob)', ...]
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.data import find
from benchmarks.kernel_cache import load_cache
from benchmarks.tla_drive import CROSS_MACHINE_ID, SOURCE_SEED, Settings, drive_all, make_engine, run_tuner
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation

__all__ = ["KERNEL_SOURCE", "KERNEL_TARGET", "run_cross_machine"]

KERNEL_SOURCE, KERNEL_TARGET = "dedispersion_A100.json.gz", "dedispersion_W7800.json.gz"


def run_cross_machine(settings: Settings, data_dir: Path | None = None) -> dict[str, Any]:
    """NoTLA and the TLA tuners tuning dedispersion on the W7800 with 200 A100 measurements as the source.

    Args:
        settings: the seeds and evaluations to run.
        data_dir: the folder holding the Kernel Tuner caches (default ``None``: the benchmark's data folder).
    """
    from raytuner.engines.transfer import SourceData

    started = time.perf_counter()
    a100, w7800 = (
        load_cache(Path(data_dir) / name if data_dir is not None else find(f"kernel_tuner/{name}"))
        for name in (KERNEL_SOURCE, KERNEL_TARGET)
    )
    if a100.values != w7800.values or a100.parameter_names != w7800.parameter_names:
        raise ValueError(f"{KERNEL_SOURCE} and {KERNEL_TARGET} tune different spaces")
    problem = w7800.problem()
    records = []
    for config in a100.sample(settings.source_samples, seed=SOURCE_SEED):
        t, why = a100.time(config), a100.failure(config)
        records.append(
            FunctionEvaluation.create(
                {},
                config,
                None if t is None else {"time": t},
                failure=why,
                machine_configuration={"machine_name": "A100"},
            )
        )
    source = SourceData(problem, records, executor=InlineExecutor())
    restricted = w7800.problem(restrict_to_valid=True)  # NoTLA (MLA) then samples and searches valid configs only
    times = [t for t in w7800.times if t is not None]

    def evaluate_w7800(config: Mapping[str, Any]) -> tuple[float | None, str | None]:
        return w7800.time(config), w7800.failure(config)

    traces = drive_all(
        CROSS_MACHINE_ID,
        settings,
        settings.cross_machine_seeds,
        settings.cross_machine_tuners,
        lambda tuner, seed: make_engine(
            tuner, problem, {}, source, seed, settings, candidates=w7800.configs, notla_problem=restricted
        ),
        evaluate_w7800,
        objective="time",
        machine={"machine_name": "W7800"},
        valid=w7800.__contains__,
    )
    # what MLA does without the constraint: how many of its suggestions fall outside the valid space
    unconstrained = (
        [
            run_tuner(
                make_engine("NoTLA", problem, {}, source, seed, settings),
                evaluate_w7800,
                settings.evaluations,
                objective="time",
                machine={"machine_name": "W7800"},
                valid=w7800.__contains__,
            )
            for seed in settings.cross_machine_seeds
        ]
        if "NoTLA" in settings.cross_machine_tuners
        else []
    )
    return {
        "id": CROSS_MACHINE_ID,
        "function": "kernel_cache",
        "notla_unconstrained": {
            "outside_valid_space": [t.outside_valid for t in unconstrained],
            "best": [float(np.nanmin(t.values)) if np.isfinite(t.values).any() else None for t in unconstrained],
            "evaluations": settings.evaluations,
        },
        "description": f"{w7800.kernel}: {settings.source_samples} random configurations measured on "
        f"{a100.device} -> tune on {w7800.device} ({len(w7800.configs)} valid configurations)",
        "sources": [
            {
                "machine_name": "A100",
                "file": KERNEL_SOURCE,
                "failed_in_source": sum(r.status == "failed" for r in records),
            }
        ],
        "target": {"machine_name": "W7800", "file": KERNEL_TARGET},
        "optimum": w7800.optimum,
        "source_optimum": a100.optimum,
        "scale": float(np.median(times)) - w7800.optimum,
        "traces": traces,
        "seeds": list(settings.cross_machine_seeds),
        "source_samples_per_task": settings.source_samples,
        "wall_s": time.perf_counter() - started,
    }
