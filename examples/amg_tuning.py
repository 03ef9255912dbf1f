"""Tune PyAMG's setup+solve time on 3-D convection-diffusion problems with GPTuneBand (one-shot fidelity).

The hypre/BoomerAMG case of the GPTuneBand paper (paper 004, section 5.2),
with PyAMG in place of hypre: solve -cΔu + a(u_x + u_y + u_z) = 1 on the unit
cube with zero Dirichlet boundary, on a k³ grid of interior points (7-point
finite differences; first-order upwind convection, so the matrix is an
M-matrix for any a >= 0 and c > 0). The tasks are coefficient pairs (a, c);
the objective is the wall time of the AMG setup plus the solve to relative
residual 1e-8 (minimised), or with ``--objective work`` the solve's
deterministic work (matrix-vector products), with which a run
repeats exactly by seed. The tuning parameters mirror BoomerAMG's: strength
threshold, AMG method (classical Ruge-Stuben or smoothed aggregation), RS
coarsening and interpolation, SA aggregation, smoother, its weight, pre/post
sweeps, maximum coarse size, cycle type and Krylov acceleration. Two
constraints keep AMLI cycles where PyAMG takes them (standalone or under
fgmres, and not in a smoothed-aggregation hierarchy of a nonsymmetric matrix).

The fidelity b in [b_min, b_max] maps to k by interpolating k³ linearly
between k_min³ at b_min and k_max³ at b_max (as the paper does), so the cost
of an evaluation grows like k³, i.e. linearly in b. Promotions of successive
halving are new, larger solves (one-shot mode).

A solve that raises, diverges, stalls at its iteration limit, runs past its
time limit or ends with a non-finite or unconverged solution is a *failed*
evaluation: it is recorded as such and never stops the tuning.

Run (through Ray Tune with raytuner.schedulers.GPTuneBandScheduler when available,
else through the sequential engine raytuner.engines.GPTuneBand):
    python examples/amg_tuning.py                 # 3 tasks, k = 10..40, [b_min, b_max, eta] = [1, 8, 2]
    python examples/amg_tuning.py --quick         # 2 tasks, k = 10..20, [1, 4, 2]: under a minute
    python examples/amg_tuning.py --runner engine # force the sequential engine
    python examples/amg_tuning.py --runner engine --objective work --budget 12   # repeatable, 12 per task
"""

from __future__ import annotations

from _extras import require, temporary_store

require(__file__, "pyamg", "numpy", "scipy", "ray")

import argparse
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from raytuner.test_problems.amg import (  # noqa: F401  (the problem and solver, re-exported for the tests and users)
    AMG_PROBLEM,
    DEFAULT_TASKS,
    OBJECTIVES,
    TOL,
    SolveFailure,
    amg_problem,
    convection_diffusion,
    fidelity_to_k,
    solve,
    solve_time,
    solve_work,
)

log = logging.getLogger("amg_tuning")


# -- tuning ----------------------------------------------------------------------------------------


def one_shot_trainable(
    config: dict[str, Any],
    *,
    b_min: float,
    b_max: float,
    k_min: int,
    k_max: int,
    time_limit: float | None = None,
    objective: str = "runtime",
) -> None:
    """Ray Tune trainable: one solve at grid ``k(config["fidelity"])``; a failure reports a NaN objective."""
    from ray import tune

    k = fidelity_to_k(float(config["fidelity"]), b_min, b_max, k_min, k_max)
    task = {"a": config["a"], "c": config["c"]}
    try:
        tune.report({objective: OBJECTIVES[objective](task, config, k, time_limit=time_limit), "k": k})
    except SolveFailure as exc:
        tune.report({objective: float("nan"), "k": k, "failure": exc.reason})


def run_engine(
    problem: Any,
    tasks: Sequence[Mapping[str, Any]],
    args: argparse.Namespace,
    evaluate: Callable[[Mapping[str, Any], Mapping[str, Any], int], float] | None = None,
    executor: Any = None,
    lcm: Any = None,
) -> tuple[Any, list[Any]]:
    """Tune sequentially with the ask/tell engine ``raytuner.engines.GPTuneBand``.

    Returns the engine and the evaluation records in order (failed solves are failed records).

    ``evaluate(task, config, k)`` defaults to :func:`solve_time` with ``args.time_limit``.
    """
    from raytuner.engines import GPTuneBand

    evaluate = evaluate or functools.partial(OBJECTIVES[args.objective], time_limit=args.time_limit)
    name = problem.objectives[0]
    band = GPTuneBand(
        problem,
        tasks,
        seed=args.seed,
        b_min=args.b_min,
        b_max=args.b_max,
        eta=args.eta,
        passes=args.passes,
        budget=args.budget,
        fidelity_mode="one_shot",
        executor=executor,
        lcm=lcm,
    )
    records: list[Any] = []
    while not band.finished:
        s = band.ask()
        assert s.fidelity is not None  # GPTuneBand gives every suggestion its fidelity
        k = fidelity_to_k(s.fidelity, args.b_min, args.b_max, args.k_min, args.k_max)
        try:
            record = band.tell(s, {name: evaluate(s.task, s.config, k)}, additional_output={"k": k})
        except SolveFailure as exc:
            record = band.tell(s, None, failure=exc.reason, additional_output={"k": k})
        records.append(record)
        value = record.value(name)
        why = record.raytuner.failure_message if record.raytuner is not None else None
        log.info(
            "eval %3d task a=%g c=%g bracket %s rung %s b=%g k=%d: %s",
            len(records),
            s.task["a"],
            s.task["c"],
            s.provenance.bracket,
            s.provenance.rung,
            s.fidelity,
            k,
            f"{name} {value:.4f}" if value is not None else f"FAILED ({why})",
        )
    return band, records


def run_ray(problem: Any, tasks: Sequence[Mapping[str, Any]], args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """Tune through Ray Tune with the trial scheduler ``raytuner.schedulers.GPTuneBandScheduler``.

    Returns the scheduler and the evaluation records it stored (a failed solve reports a NaN runtime,
    which the scheduler stores as a failed evaluation).
    """
    import ray
    from ray import tune
    from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler
    from raytuner.searchers import TuningProgress

    from raytuner.engines import BanditStructure
    from raytuner.store import JsonStore

    store = Path(args.store).resolve() if args.store else temporary_store("amg_tuning_")
    band = GPTuneBandScheduler(
        problem,
        tasks,
        str(store),
        args.problem,
        seed=args.seed,
        structure=BanditStructure.hyperband(args.b_min, args.b_max, args.eta),
        options=GPTuneBandOptions(
            passes=args.passes, budget=args.budget, fidelity_mode="one_shot", fidelity_key="fidelity"
        ),
    )
    trainable = tune.with_parameters(
        one_shot_trainable,
        b_min=args.b_min,
        b_max=args.b_max,
        k_min=args.k_min,
        k_max=args.k_max,
        time_limit=args.time_limit,
        objective=args.objective,
    )
    local = args.address == "local"  # a fresh local Ray, not a stale or foreign running one
    ray.init(
        address=args.address,
        num_cpus=args.concurrent if local else None,
        include_dashboard=False,
        log_to_driver=False,
        ignore_reinit_error=True,
    )
    try:
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=band.searcher(),
                scheduler=band,
                metric=args.objective,
                mode="min",
                num_samples=-1,
                max_concurrent_trials=args.concurrent,
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name=args.problem,
                storage_path=str(store / "ray"),  # Ray's files in the store's folder
                verbose=0,
                callbacks=[TuningProgress(band)],
            ),
        )
        results = tuner.fit()  # a ResultGrid: one Result per trial, the failed ones in results.errors
        if results.errors:
            log.warning("%d of %d trials failed", len(results.errors), len(results))
    finally:
        ray.shutdown()
    log.info("evaluations stored under %s", store)
    return band, JsonStore(store).evaluations(args.problem)


def print_summary(
    tasks: Sequence[Mapping[str, Any]],
    records: Sequence[Any],
    best: Sequence[Any],
    k_max: int,
    objective: str = "runtime",
) -> None:
    """Evaluations, failures and normalised cost per task, then the best configuration at b_max (k = k_max)."""
    print(f"\nAt k = {k_max} (b_max):")
    from raytuner.analysis import task_summary

    print("\n".join(task_summary(tasks, records, best, objective)))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="small run: 2 tasks, k = 10..20, [b_min, b_max, eta] = [1, 4, 2]"
    )
    parser.add_argument(
        "--runner",
        choices=["ray", "engine"],
        default="ray",
        help="ray: Ray Tune + raytuner.schedulers.GPTuneBandScheduler; engine: sequential ask/tell",
    )
    parser.add_argument(
        "--tasks",
        type=float,
        nargs="+",
        default=None,
        help="task coefficients as a flat list a1 c1 a2 c2 ... (default: 3 tasks, 2 with --quick)",
    )
    parser.add_argument("--b-min", type=float, default=1.0)
    parser.add_argument("--b-max", type=float, default=None, help="default 8, 4 with --quick")
    parser.add_argument("--eta", type=int, default=2)
    parser.add_argument("--passes", type=int, default=None, help="default 1 (with --budget: as the budget allows)")
    parser.add_argument("--budget", type=float, default=None, help="normalised cost per task at which each task ends")
    parser.add_argument(
        "--objective",
        choices=sorted(OBJECTIVES),
        default="runtime",
        help="runtime: wall time of setup + solve; work: matrix-vector products of the solve (deterministic)",
    )
    parser.add_argument("--k-min", type=int, default=10)
    parser.add_argument("--k-max", type=int, default=None, help="grid size at b_max (default 40, 20 with --quick)")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="seconds before a solve counts as failed (default 15, 3 with --quick)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrent", type=int, default=2, help="trials at once under Ray (and Ray CPUs)")
    parser.add_argument(
        "--address",
        default="local",
        help="Ray address: 'local' starts a fresh local Ray, 'auto' or host:port joins a cluster",
    )
    parser.add_argument(
        "--store",
        default=None,
        help="JSON store directory for the Ray runner (default: a temporary one, removed at the end)",
    )
    parser.add_argument("--problem", default="pyamg-convdiff", help="problem name in the store")
    args = parser.parse_args(argv)
    if args.tasks is not None:
        if len(args.tasks) % 2:
            parser.error("--tasks needs pairs a c")
        tasks = [{"a": a, "c": c} for a, c in zip(args.tasks[::2], args.tasks[1::2])]
    else:
        tasks = DEFAULT_TASKS[1:] if args.quick else DEFAULT_TASKS
    args.task_list = tasks
    args.b_max = args.b_max if args.b_max is not None else (4.0 if args.quick else 8.0)
    args.k_max = args.k_max if args.k_max is not None else (20 if args.quick else 40)
    if args.time_limit is None:
        args.time_limit = 3.0 if args.quick else 15.0
    return args


def main(argv: list[str] | None = None) -> list[Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from raytuner.engines import BanditStructure
    from raytuner.problem.space import ProblemSpace

    problem = ProblemSpace.parse(amg_problem(args.objective))
    tasks = args.task_list
    runner = args.runner
    fidelities = BanditStructure.hyperband(args.b_min, args.b_max, args.eta).fidelities
    log.info(
        "runner %s: %d tasks, [b_min, b_max, eta] = [%g, %g, %d], grid sizes k = %s",
        runner,
        len(tasks),
        args.b_min,
        args.b_max,
        args.eta,
        [fidelity_to_k(b, args.b_min, args.b_max, args.k_min, args.k_max) for b in fidelities],
    )
    start = time.perf_counter()
    band, records = (run_ray if runner == "ray" else run_engine)(problem, tasks, args)
    elapsed = time.perf_counter() - start
    best = band.best_per_task()
    print_summary(tasks, records, best, args.k_max, args.objective)
    print(f"tuning took {elapsed:.1f} s")
    return best


if __name__ == "__main__":
    main()
