"""Tune GPTune's demo function for several tasks at once on a local Ray.

Random search (raytuner.searchers.RandomSearcher) proposes configurations for
every task; each finished trial is written to the embedded JSON history store
(one GPTune-format file) before the next suggestion; at the end the best
configuration per task is printed next to the true optimum found by a grid.

Run:
    python examples/multitask_demo.py --store raytuner_results --samples-per-task 10

Running it again with the same --store continues the same problem: the stored
evaluations are replayed and the new ones are added to them.
"""

from __future__ import annotations

from _extras import require

require(__file__, "ray")

import argparse
import logging
from pathlib import Path

import ray
from ray import tune
from raytuner.searchers import RandomSearcher, TuningProgress

from raytuner.problem.space import ProblemSpace
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_grid_minimum


def trainable(config: dict) -> None:
    """One evaluation of the demo function: a trial config holds the task t and the parameter x."""
    tune.report({"y": demo(config["x"], config["t"])})


def main(argv: list[str] | None = None) -> dict[float, dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="raytuner_results", help="JSON store directory")
    parser.add_argument("--problem", default="GPTune-Demo", help="tuning problem name")
    parser.add_argument("--tasks", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0], help="task values t")
    parser.add_argument("--samples-per-task", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": t} for t in args.tasks]
    store = JsonStore(Path(args.store))
    searcher = RandomSearcher(problem, tasks, store, args.problem, seed=args.seed)
    ray.init(
        address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True
    )
    try:
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                metric="y",
                mode="min",
                num_samples=args.samples_per_task * len(tasks),
                max_concurrent_trials=args.cpus,
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name=args.problem,
                storage_path=str(Path(args.store).resolve() / "ray"),  # Ray's files in the store's folder
                verbose=0,
                callbacks=[TuningProgress(searcher)],
            ),
        )
        results = tuner.fit()  # a ResultGrid: one Result per trial, the failed ones in results.errors
        print(f"{len(results)} trials, {len(results.errors)} failed; Ray's best: {results.get_best_result().config}")
    finally:
        ray.shutdown()
    store.compact(args.problem)

    best: dict[float, dict] = {}
    print(f"\nBest configuration per task (store: {store.path(args.problem)}):")
    print(f"{'t':>6} {'evals':>6} {'best x':>9} {'best y':>9} {'grid x*':>9} {'grid y*':>9}")
    for task in tasks:
        record = searcher.session.best(task)
        evaluations = sum(1 for r in searcher.session.records if r.task_parameter == task)
        x_star, y_star = demo_grid_minimum(task["t"])
        if record is None:
            print(f"{task['t']:>6g} {evaluations:>6} {'-':>9} {'-':>9} {x_star:>9.4f} {y_star:>9.4f}")
            continue
        best[task["t"]] = {"x": record.tuning_parameter["x"], "y": record.value("y")}
        print(
            f"{task['t']:>6g} {evaluations:>6} {record.tuning_parameter['x']:>9.4f} {record.value('y'):>9.4f} "
            f"{x_star:>9.4f} {y_star:>9.4f}"
        )
    store.close()
    return best


if __name__ == "__main__":
    main()
