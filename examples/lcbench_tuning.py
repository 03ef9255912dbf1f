"""Multi-fidelity ML hyperparameter tuning of several LCBench tasks at once with GPTuneBand on Ray Tune.

LCBench (YAHPO Gym's ONNX surrogate of MLP learning curves on OpenML tasks)
stands in for real training: a trial "trains" one epoch per iteration, up to
52, and reports val_accuracy with a checkpoint holding its epoch count.
raytuner.schedulers.GPTuneBandScheduler runs Hyperband's brackets in whole epochs
(52, 17, 6 and 2; [b_min, b_max, eta] = [1, 52, 3]) for every task, samples
each bracket's configurations with one LCM over all tasks (multitask
transfer), PAUSEs trials between rungs and resumes the promoted ones from
their checkpoints, so a promotion pays only the extra epochs ("iterative"
fidelity). Every evaluation lands in the JSON store; at the end the best
configuration per task at epoch 52 is printed.

The surrogate's files are read from the repository's copy in
tests/data/yahpo_lcbench (or $RAYTUNER_SHARED_DATA/yahpo_lcbench, or
--data-dir); nothing is downloaded.

Run:
    python examples/lcbench_tuning.py --store raytuner_results --tasks 3945 7593 34539 --passes 1

Running it again with the same --store continues the same problem (stored
evaluations are replayed, even in the middle of a bracket).
"""

from __future__ import annotations

from _extras import json_logger_for_resumed_trials, require

require(__file__, "onnxruntime", "numpy", "ray")

import argparse
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune import Checkpoint
from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler
from raytuner.searchers import TuningProgress

from raytuner.engines import BanditStructure
from raytuner.store import JsonStore
from raytuner.test_problems.lcbench import EPOCHS, HYPERPARAMETERS, LCBENCH_TASKS, LCBenchSurrogate

log = logging.getLogger("lcbench_tuning")

_SURROGATE: LCBenchSurrogate | None = None


def surrogate(data_dir: str | None) -> LCBenchSurrogate:
    """The surrogate, loaded once per Ray worker process."""
    global _SURROGATE
    if _SURROGATE is None:
        _SURROGATE = LCBenchSurrogate(data_dir)
    return _SURROGATE


def trainable(config: dict[str, Any], data_dir: str | None = None) -> None:
    """Train one epoch per iteration up to 52; checkpoint the epoch count and continue from it on a resume."""
    model = surrogate(data_dir)
    epoch = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            epoch = json.loads((Path(folder) / "state.json").read_text())["epoch"]
    params = {name: config[name] for name in HYPERPARAMETERS}
    while epoch < EPOCHS[1]:
        epoch += 1
        outputs = model.evaluate(config["task_id"], params, epoch)  # one "epoch" of training
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "state.json").write_text(json.dumps({"epoch": epoch}))
            tune.report(
                {"val_accuracy": outputs["val_accuracy"], "val_cross_entropy": outputs["val_cross_entropy"]},
                checkpoint=Checkpoint.from_directory(folder),
            )


def main(argv: list[str] | None = None) -> dict[int, dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="raytuner_results", help="JSON store directory")
    parser.add_argument("--problem", default="LCBench-GPTuneBand", help="tuning problem name")
    parser.add_argument("--tasks", type=int, nargs="+", default=list(LCBENCH_TASKS[:3]), help="OpenML task ids")
    parser.add_argument("--passes", type=int, default=1, help="GPTuneBand passes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrent", type=int, default=2, help="trials running at once (and Ray CPUs)")
    parser.add_argument(
        "--data-dir", default=None, help="the yahpo_lcbench folder (default: the repository's tests/data/yahpo_lcbench)"
    )
    parser.add_argument(
        "--address", default="local", help="Ray address: 'local' starts a private Ray, 'auto' joins the running cluster"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    model = LCBenchSurrogate(args.data_dir)
    problem = model.problem(args.tasks)
    tasks = [{"task_id": t} for t in args.tasks]
    structure = BanditStructure.hyperband(1, EPOCHS[1], 3, integer=True)  # epochs 52, 17, 6, 2
    store = JsonStore(Path(args.store))
    band = GPTuneBandScheduler(
        problem,
        tasks,
        store,
        args.problem,
        metric="val_accuracy",
        mode="max",
        seed=args.seed,
        structure=BanditStructure(structure.fidelities, structure.eta),
        options=GPTuneBandOptions(passes=args.passes, fidelity_mode="iterative", time_attr="training_iteration"),
    )
    log.info(
        "tuning tasks %s: %d pass(es) of brackets %s, %.1f epochs/52 per task and pass",
        args.tasks,
        args.passes,
        list(structure.fidelities),
        structure.cost_per_pass("iterative"),
    )
    # The store keeps every result: of Ray's per-trial logger files only result.json stays (ResultGrid reads it),
    # written by a logger that keeps the driver's file when a paused trial resumes (Ray's fetched it back from
    # storage_path before Ray had synced it there: one "Remote file not found" warning per resume)
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    own_cpus = {"num_cpus": args.concurrent} if args.address == "local" else {}
    ray.init(address=args.address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True, **own_cpus)
    try:
        tuner = tune.Tuner(
            tune.with_parameters(trainable, data_dir=str(model.data_dir)),
            tune_config=tune.TuneConfig(
                search_alg=band.searcher(),
                scheduler=band,
                metric="val_accuracy",
                mode="max",  # the problem maximises it too
                num_samples=-1,
                max_concurrent_trials=args.concurrent,
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name=args.problem,
                storage_path=str(Path(args.store).resolve() / "ray"),  # Ray's files in the store's folder
                verbose=0,
                callbacks=[TuningProgress(band), json_logger_for_resumed_trials()],
            ),
        )
        results = tuner.fit()  # a ResultGrid: one Result per trial, the failed ones in results.errors
        if results.errors:
            log.warning("%d of %d trials failed", len(results.errors), len(results))
    finally:
        ray.shutdown()

    best: dict[int, dict[str, Any]] = {}
    print(f"\nBest configuration per task at epoch {EPOCHS[1]} (store: {Path(args.store).resolve()}):")
    for task, record in zip(args.tasks, band.best_per_task()):
        if record is None:
            print(f"  task {task}: no evaluation reached epoch {EPOCHS[1]}")
            continue
        best[task] = {"val_accuracy": record.value("val_accuracy"), **record.tuning_parameter}
        config = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.tuning_parameter.items()
        )
        print(f"  task {task}: val_accuracy {record.value('val_accuracy'):.2f}  ({config})")
    store.close()
    return best


if __name__ == "__main__":
    main()
