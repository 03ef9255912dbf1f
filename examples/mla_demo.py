"""Tune GPTune's demo function for several tasks together with multitask BO (MLA) on a local Ray.

raytuner.searchers.LCMSearcher fits one LCM to the evaluations of every task
(paper 004, section 5.1: y(x, t) for t = 1, 2, 3, 4 by default) and suggests
the next configuration of each task by expected improvement. Each finished
trial is written to the embedded JSON history store before the next
suggestion; at the end the best x and y per task are printed next to the true
optimum found by a dense grid, and the best-so-far y of each task is plotted
against its number of evaluations.

Run:
    python examples/mla_demo.py --store raytuner_results --samples-per-task 20 --initial 8

Running it again with the same --store continues the same problem: the stored
evaluations (and the last surrogate model, as a warm start) are replayed.
"""

from __future__ import annotations

from _extras import require

require(__file__, "ray", "matplotlib")

import argparse
import logging
from pathlib import Path

import ray
from ray import tune
from raytuner.searchers import LCMSearcher, TuningProgress

from raytuner.problem.space import ProblemSpace
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_grid_minimum
from raytuner.view import load_history, plot_history

log = logging.getLogger("mla_demo")


def trainable(config: dict) -> None:
    """One evaluation of the demo function: a trial config holds the task t and the parameter x."""
    tune.report({"y": demo(config["x"], config["t"])})


def main(argv: list[str] | None = None) -> dict[float, dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="raytuner_results", help="JSON store directory")
    parser.add_argument("--problem", default="GPTune-Demo-MLA", help="tuning problem name")
    parser.add_argument("--tasks", type=float, nargs="+", default=[1.0, 2.0, 3.0, 4.0], help="task values t")
    parser.add_argument("--samples-per-task", type=int, default=20, help="evaluations per task in this run")
    parser.add_argument("--initial", type=int, default=8, help="initial LHS configurations per task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrent", type=int, default=2, help="trials running at once (and Ray CPUs)")
    parser.add_argument("--plot", default="mla_best_so_far.png", help="where to write the best-so-far plot")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": t} for t in args.tasks]
    store = JsonStore(Path(args.store))
    searcher = LCMSearcher(
        problem, tasks, store, args.problem, seed=args.seed, engine_options={"n_initial": args.initial}
    )
    log.info(
        "tuning %d tasks, %d samples each (%d initial), %d evaluations already stored",
        len(tasks),
        args.samples_per_task,
        args.initial,
        len(searcher.session.records),
    )
    ray.init(
        address="local",
        num_cpus=args.concurrent,
        include_dashboard=False,
        log_to_driver=False,
        ignore_reinit_error=True,
    )
    try:
        total = args.samples_per_task * len(tasks)
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                metric="y",
                mode="min",
                num_samples=total,
                max_concurrent_trials=args.concurrent,
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
        log.info("%d trials, %d failed", len(results), len(results.errors))
    finally:
        ray.shutdown()
    store.compact(args.problem)
    log.info("%d surrogate models stored", len(store.models(args.problem)))

    best: dict[float, dict] = {}
    print(f"\nBest configuration per task (store: {store.path(args.problem)}):")
    print(f"{'t':>6} {'evals':>6} {'best x':>9} {'best y':>9} {'grid x*':>9} {'grid y*':>9} {'y/y*':>7}")
    for task in tasks:
        values = [r.value("y") for r in searcher.session.records if r.task_parameter == task]
        record = searcher.session.best(task)
        x_star, y_star = demo_grid_minimum(task["t"])
        if record is None:
            print(f"{task['t']:>6g} {len(values):>6} {'-':>9} {'-':>9} {x_star:>9.4f} {y_star:>9.4f} {'-':>7}")
            continue
        x, y = record.tuning_parameter["x"], record.value("y")
        best[task["t"]] = {"x": x, "y": y}
        print(f"{task['t']:>6g} {len(values):>6} {x:>9.4f} {y:>9.4f} {x_star:>9.4f} {y_star:>9.4f} {y / y_star:>7.3f}")
    plot_history(load_history(store, args.problem)).savefig(args.plot, dpi=120)
    log.info("wrote %s", args.plot)
    store.close()
    return best


if __name__ == "__main__":
    main()
