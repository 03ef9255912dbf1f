"""Transfer learning on GPTune's demo function: tune a new task from other tasks' history, on a local Ray.

First the source tasks (t = 0.8 by default; several with ``--source-t``) are
sampled at random and their evaluations are stored in the embedded JSON
history store under their own problem name (``demo-source``), as earlier
tuning runs would have left them. Then the target task (t = 1.0 by default) is tuned with
raytuner.searchers.TransferLearningSearcher, which reads the source back through
``raytuner.store.StoreSource``: with ``--algorithm ensemble`` (the default)
each suggestion comes from one algorithm of the pool (multitask_ts,
weighted_sum_dynamic, stacking), drawn by how well each has done so far; the
first one, before the target has any data, from weighted_sum_equal. Each
evaluation of the target is printed with the algorithm that proposed it, and
the best one found beside the true optimum (a dense grid).

With ``--algorithm tla2`` the target is tuned with GPTune's TLA2
(raytuner.searchers.TLA2Searcher) from two or more tuned source tasks: TLA1
first predicts the target's optimum from the sources' optima (printed, no
evaluation needed), TLA2 samples around it and then models the target as a
new task of the sources' LCM.

Run:
    python examples/transfer_demo.py --store raytuner_results --samples 20
    python examples/transfer_demo.py --algorithm tla2 --source-t 0.6 0.8 1.2 1.4 --samples 10

Running it again with the same --store continues the target's tuning (the
source is sampled only up to --source-samples).
"""

from __future__ import annotations

from _extras import require, temporary_store

require(__file__, "ray")

import argparse
import logging
import sys
from pathlib import Path

import ray
from ray import tune
from raytuner.searchers import TLA2Searcher, TransferLearningSearcher, TuningProgress

from raytuner.analysis import task_summary
from raytuner.engines import RandomSearch
from raytuner.engines.transfer import ALGORITHMS, ENSEMBLES
from raytuner.models import LCMOptions
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore, StoreSource
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_grid_minimum

log = logging.getLogger("transfer_demo")


def trainable(config: dict) -> None:
    """One evaluation of the demo function: a trial config holds the task t and the parameter x."""
    tune.report({"y": demo(config["x"], config["t"])})


def collect_source(problem: ProblemSpace, store: JsonStore, name: str, ts: list[float], samples: int, seed: int) -> int:
    """Random samples of the tasks ``ts`` under ``name`` until each has ``samples`` (no Ray: the demo is cheap).

    A session records them as any tuning run would (with the machine and
    software configuration). Returns how many evaluations the source holds.
    """
    session = TuningSession.resume(problem, RandomSearch(problem, [{"t": t} for t in ts], seed=seed), store, name)
    for _ in range(samples * len(ts) - len(session.records)):
        trial = session.ask()
        session.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})
    store.compact(name)
    return len(session.records)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store", default=None, help="JSON store directory (default: a temporary one, removed at the end)"
    )
    parser.add_argument("--source-problem", default="demo-source", help="problem name of the source history")
    parser.add_argument("--problem", default="demo-target", help="problem name of the target's evaluations")
    parser.add_argument(
        "--source-t", type=float, nargs="+", default=[0.8], help="tasks of the source history (tla2: two or more)"
    )
    parser.add_argument("--target-t", type=float, default=1.0, help="task to tune")
    parser.add_argument(
        "--source-samples",
        type=int,
        default=None,
        help="random evaluations of each source task (default 200, 100 with --quick)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=None,
        help="evaluations of the target task in this run (default 20, 6 with --quick)",
    )
    parser.add_argument(
        "--algorithm",
        default="ensemble",
        choices=[*ALGORITHMS, "tla2"],
        help="transfer-learning algorithm (tla2: GPTune's TLA2)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrent", type=int, default=2, help="trials running at once (and Ray CPUs)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run: fewer source samples and target evaluations, cheaper model fits",
    )
    args = parser.parse_args(argv)
    if args.algorithm == "tla2" and (len(set(args.source_t)) < 2 or args.target_t in args.source_t):
        parser.error("--algorithm tla2 needs two or more --source-t tasks, none of them the --target-t")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    source_samples = args.source_samples if args.source_samples is not None else (100 if args.quick else 200)
    samples = args.samples if args.samples is not None else (6 if args.quick else 20)
    options = LCMOptions(n_starts=2, max_iterations=200, warm_iterations=50) if args.quick else None

    problem = ProblemSpace.parse(DEMO_PROBLEM)
    directory = Path(args.store) if args.store else temporary_store("transfer_demo_")
    store = JsonStore(directory)
    n_source = collect_source(problem, store, args.source_problem, args.source_t, source_samples, args.seed)
    tasks_text = ", ".join(f"{t:g}" for t in args.source_t)
    print(f"Source: {n_source} random evaluations of t={tasks_text} in {store.path(args.source_problem)}")

    target = {"t": args.target_t}
    ray.init(address="local", num_cpus=args.concurrent, include_dashboard=False, log_to_driver=False)
    try:
        source = StoreSource(store, args.source_problem)
        if args.algorithm == "tla2":
            searcher: TransferLearningSearcher | TLA2Searcher = TLA2Searcher(
                problem, target, source, store, args.problem, seed=args.seed, engine_options={"lcm": options}
            )
            predicted = searcher.engine.tla1.predict(target)
            print(
                f"TLA1 predicts x = {predicted.config['x']:.4f} (sd {predicted.std['x']:.4f}) for "
                f"t={args.target_t:g}, where y = {demo(predicted.config['x'], args.target_t):.4f}"
            )
        else:
            searcher = TransferLearningSearcher(
                problem,
                target,
                source,
                store,
                args.problem,
                seed=args.seed,
                engine_options={"algorithm": args.algorithm, "lcm": options},
            )
        replayed = len(searcher.session.records)
        print(
            f"Target: t={args.target_t:g} with {args.algorithm}, {samples} evaluations"
            + (f" after {replayed} stored ones" if replayed else ""),
            flush=True,
        )
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                metric="y",
                mode="min",
                num_samples=samples,
                max_concurrent_trials=args.concurrent,
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name=args.problem,
                storage_path=str(directory.resolve() / "ray"),  # Ray's files in the store's folder
                verbose=0,
                callbacks=[TuningProgress(searcher)],
            ),
        )
        results = tuner.fit()  # a ResultGrid: one Result per trial, the failed ones in results.errors
        if results.errors:
            print(f"{len(results.errors)} of {len(results)} trials failed", flush=True)
    finally:
        ray.shutdown()

    records = searcher.session.records
    print(f"\nEvaluations of the target (store: {store.path(args.problem)}):")
    print(f"{'#':>3} {'proposed by':<22} {'x':>8} {'y':>8} {'best y':>8}")
    best_y = float("inf")
    for i, record in enumerate(records, 1):
        y = record.value("y")
        best_y = min(best_y, y) if y is not None else best_y
        y_text = f"{y:>8.4f}" if y is not None else f"{'failed':>8}"
        print(f"{i:>3} {record.modeling or '-':<22} {record.tuning_parameter['x']:>8.4f} {y_text} {best_y:>8.4f}")
    if isinstance(searcher, TransferLearningSearcher) and args.algorithm in ENSEMBLES:
        shares = ", ".join(f"{name} {p:.2f}" for name, p in searcher.engine.probabilities().items())
        print(f"Ensemble probabilities now: {shares}; exploration rate {searcher.engine.exploration_rate():.3f}")

    best = searcher.session.best(target)
    x_star, y_star = demo_grid_minimum(args.target_t)
    print()
    print("\n".join(task_summary([target], records, [best], "y")))
    if best is None:
        print(f"No successful evaluation; grid minimum y* = {y_star:.4f} at x* = {x_star:.4f}")
        store.close()
        return {}
    x, y = best.tuning_parameter["x"], float(best.value("y"))
    print(
        f"Best found: y = {y:.4f} at x = {x:.4f} (proposed by {best.modeling}); "
        f"grid minimum y* = {y_star:.4f} at x* = {x_star:.4f}; gap {y - y_star:.4f}"
    )
    store.close()
    return {"x": x, "y": y, "x_star": x_star, "y_star": y_star}


if __name__ == "__main__":
    main(sys.argv[1:])
