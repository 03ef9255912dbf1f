"""Tune PyAMG's setup+solve time on 3-D convection-diffusion problems with GPTuneBand (one-shot fidelity).

The hypre/BoomerAMG case of the GPTuneBand paper (paper 004, section 5.2),
with PyAMG in place of hypre: solve -cΔu + a(u_x + u_y + u_z) = 1 on the unit
cube with zero Dirichlet boundary, on a k³ grid of interior points (7-point
finite differences; first-order upwind convection, so the matrix is an
M-matrix for any a >= 0 and c > 0). The tasks are coefficient pairs (a, c);
the objective is the wall time of the AMG setup plus the solve to relative
residual 1e-8 (minimised), or with ``--objective work`` the solve's
deterministic work (iterations × cycle complexity), with which a run
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
else through the sequential engine raytuner.strategies.GPTuneBand):
    python examples/amg_tuning.py                 # 3 tasks, k = 10..40, [b_min, b_max, eta] = [1, 8, 2]
    python examples/amg_tuning.py --quick         # 2 tasks, k = 10..20, [1, 4, 2]: under a minute
    python examples/amg_tuning.py --runner engine # force the sequential engine
    python examples/amg_tuning.py --runner engine --objective work --budget 12   # repeatable, 12 per task
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import hashlib
import json
import logging
import math
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

log = logging.getLogger("amg_tuning")

#: Task space (a, c), tuning space and objective of the AMG problem.
AMG_PROBLEM: dict[str, Any] = {
    "input_space": [
        {"name": "a", "type": "real", "lower_bound": 0.0, "upper_bound": 10.0},
        {"name": "c", "type": "real", "lower_bound": 0.5, "upper_bound": 2.0},
    ],
    "parameter_space": [
        {"name": "strength", "type": "real", "lower_bound": 0.0, "upper_bound": 0.9},
        {"name": "method", "type": "categorical", "categories": ["ruge_stuben", "smoothed_aggregation"]},
        {"name": "coarsening", "type": "categorical", "categories": ["RS", "PMIS", "PMISc", "CLJP", "CLJPc"]},
        {"name": "interpolation", "type": "categorical", "categories": ["classical", "direct"]},
        {"name": "aggregate", "type": "categorical", "categories": ["standard", "lloyd"]},
        {"name": "smoother", "type": "categorical", "categories": ["gauss_seidel", "jacobi", "sor", "chebyshev"]},
        {"name": "relax_weight", "type": "real", "lower_bound": 0.5, "upper_bound": 1.9},
        {"name": "pre_sweeps", "type": "integer", "lower_bound": 1, "upper_bound": 3},
        {"name": "post_sweeps", "type": "integer", "lower_bound": 1, "upper_bound": 3},
        {"name": "max_coarse", "type": "integer", "lower_bound": 10, "upper_bound": 1000, "log": True},
        {"name": "cycle", "type": "categorical", "categories": ["V", "W", "F", "AMLI"]},
        {"name": "accel", "type": "categorical", "categories": ["none", "fgmres", "bicgstab"]},
    ],
    "output_space": [{"name": "runtime", "type": "real", "goal": "minimize"}],
    "constraints": {
        # An AMLI cycle is a nonlinear preconditioner: only a flexible Krylov method (fgmres) takes it.
        "amli_flexible": "cycle != 'AMLI' or accel != 'bicgstab'",
        # PyAMG refuses AMLI cycles of a smoothed-aggregation hierarchy for a nonsymmetric matrix (a > 0).
        "amli_hermitian": "cycle != 'AMLI' or method == 'ruge_stuben' or a == 0",
    },
}

def amg_problem(objective: str = "runtime") -> dict[str, Any]:
    """:data:`AMG_PROBLEM` with ``objective`` (``"runtime"`` or ``"work"``, see :data:`OBJECTIVES`) as its output.

    >>> amg_problem("work")["output_space"]
    [{'name': 'work', 'type': 'real', 'goal': 'minimize'}]
    """
    return {**AMG_PROBLEM, "output_space": [{"name": objective, "type": "real", "goal": "minimize"}]}


#: Tasks (a, c) tuned by default: diffusion-dominated to convection-dominated.
DEFAULT_TASKS: list[dict[str, float]] = [{"a": 0.0, "c": 1.0}, {"a": 5.0, "c": 1.0}, {"a": 10.0, "c": 0.5}]

TOL = 1e-8            #: relative residual the solve must reach
MAXITER = 200         #: cycles (or Krylov iterations) before a solve counts as stalled
DIVERGED = 1e6        #: a residual this many times the initial one counts as divergence
RESTART = 30          #: fgmres restart length


class SolveFailure(RuntimeError):
    """An AMG solve that gave no usable time; ``reason`` says why (diverged, stalled, error...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SolveTimeout(SolveFailure):
    """A solve (setup included) that ran past its time limit."""

    def __init__(self, reason: str = "timeout: past the time limit") -> None:
        super().__init__(reason)


@contextlib.contextmanager
def numpy_seeded(*key: Any) -> Iterator[None]:
    """Seed numpy's global random generator from ``key`` inside the block; restore the caller's state after.

    PyAMG's PMIS coarsening and its Lloyd aggregation draw from
    numpy's *global* generator, which nothing seeds: without this, one
    configuration builds a different hierarchy at every solve (its work
    varies by several per cent), and two tuning runs with the same seed
    part ways at the first such solve. Seeded from the task, the
    configuration and the grid, an evaluation repeats exactly.

    >>> with numpy_seeded("a", 1):
    ...     first = np.random.rand()
    >>> with numpy_seeded("a", 1):
    ...     first == np.random.rand()
    True
    """
    state = np.random.get_state()
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).digest()
    np.random.seed(int.from_bytes(digest[:4], "little"))
    try:
        yield
    finally:
        np.random.set_state(state)


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`SolveTimeout` in this thread once ``seconds`` have passed inside the block.

    PyAMG's setup has no callback, and a bad configuration can run for
    minutes (naive aggregation with any strength threshold > 0 does: no
    coarsening and denser operators at every level; it is left out of the
    space for that reason). A watchdog thread sets an
    asynchronous exception in the calling thread (CPython delivers it between
    bytecodes, so within one sparse operation of the deadline). It works in
    any thread, e.g. the one Ray Tune runs a function trainable in.

    >>> with deadline(0.05):
    ...     try:
    ...         while True:
    ...             pass
    ...     except SolveTimeout as exc:
    ...         print(exc.reason)
    timeout: past the time limit
    """
    if seconds is None:
        yield
        return
    target = ctypes.c_ulong(threading.get_ident())
    done, fired = threading.Event(), threading.Event()

    def watch() -> None:
        if not done.wait(seconds):
            fired.set()
            ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(SolveTimeout))

    watcher = threading.Thread(target=watch, name="amg-deadline", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        if fired.is_set():                        # not delivered yet: cancel it
            ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)


def convection_diffusion(k: int, a: float, c: float) -> sp.csr_matrix:
    """The k³ x k³ upwind finite-difference matrix of -cΔu + a(u_x + u_y + u_z), Dirichlet boundary.

    >>> A = convection_diffusion(3, a=1.0, c=1.0)
    >>> A.shape, bool((A.diagonal() > 0).all()), bool((A - sp.diags(A.diagonal())).max() <= 0)
    ((27, 27), True, True)
    """
    h = 1.0 / (k + 1)
    ones = np.ones(k)
    diffusion = (c / h**2) * sp.diags([-ones[1:], 2 * ones, -ones[1:]], [-1, 0, 1])
    upwind = (a / h) * (sp.diags([-ones[1:], ones], [-1, 0]) if a >= 0 else sp.diags([-ones, ones[1:]], [0, 1]))
    d1 = (diffusion + upwind).tocsr()
    eye = sp.identity(k, format="csr")
    return (sp.kron(sp.kron(d1, eye), eye) + sp.kron(sp.kron(eye, d1), eye)
            + sp.kron(sp.kron(eye, eye), d1)).tocsr()


def fidelity_to_k(b: float, b_min: float, b_max: float, k_min: int, k_max: int) -> int:
    """The grid size k of fidelity b: k³ interpolates k_min³ (at b_min) and k_max³ (at b_max) linearly.

    >>> [fidelity_to_k(b, 1, 8, 10, 40) for b in (1, 2, 4, 8)]
    [10, 22, 30, 40]
    """
    if b_max <= b_min:
        return k_max
    frac = min(max((b - b_min) / (b_max - b_min), 0.0), 1.0)
    return max(2, round((k_min**3 + frac * (k_max**3 - k_min**3)) ** (1.0 / 3.0)))


def _smoother(config: Mapping[str, Any], sweeps: int) -> tuple[str, dict[str, Any]]:
    """PyAMG's (name, options) for the configured smoother with ``sweeps`` iterations."""
    name, omega = config["smoother"], float(config["relax_weight"])
    if name == "gauss_seidel":
        return "gauss_seidel", {"sweep": "symmetric", "iterations": sweeps}
    if name == "jacobi":
        return "jacobi", {"omega": omega, "iterations": sweeps}
    if name == "sor":
        return "sor", {"omega": omega, "sweep": "symmetric", "iterations": sweeps}
    if name == "chebyshev":
        return "chebyshev", {"degree": sweeps + 1}
    raise SolveFailure(f"unknown smoother {name!r}")


def build_solver(A: sp.csr_matrix, config: Mapping[str, Any], symmetric: bool) -> Any:
    """The PyAMG hierarchy (setup phase) of a configuration."""
    import pyamg  # noqa: PLC0415 - only the solve needs it

    theta = float(config["strength"])
    common = dict(presmoother=_smoother(config, int(config["pre_sweeps"])),
                  postsmoother=_smoother(config, int(config["post_sweeps"])),
                  max_coarse=int(config["max_coarse"]), max_levels=25, coarse_solver="splu")
    if config["method"] == "ruge_stuben":
        return pyamg.ruge_stuben_solver(A, strength=("classical", {"theta": theta}), CF=config["coarsening"],
                                        interpolation=config["interpolation"], **common)
    return pyamg.smoothed_aggregation_solver(A, symmetry="hermitian" if symmetric else "nonsymmetric",
                                             strength=("symmetric", {"theta": theta}),
                                             aggregate=config["aggregate"], **common)


def solve(task: Mapping[str, Any], config: Mapping[str, Any], k: int, *, tol: float = TOL,
          maxiter: int = MAXITER, time_limit: float | None = None) -> tuple[float, float]:
    """AMG setup + solve of task (a, c) on a k³ grid to relative residual ``tol``: ``(seconds, work)``.

    ``work`` is deterministic: the iterations times the cycle complexity
    (one cycle's cost in fine-grid matrix-vector products). The seconds are
    wall time, which varies from run to run.

    Raises :class:`SolveFailure` when the solve raises, diverges, stalls
    (``maxiter`` reached above ``tol``), runs past ``time_limit`` seconds, or
    ends with a non-finite or unconverged solution; nothing else escapes.

    >>> cfg = dict(strength=0.25, method="ruge_stuben", coarsening="RS", interpolation="classical",
    ...            aggregate="standard", smoother="gauss_seidel", relax_weight=1.0, pre_sweeps=1,
    ...            post_sweeps=1, max_coarse=50, cycle="V", accel="none")
    >>> seconds, work = solve({"a": 1.0, "c": 1.0}, cfg, k=8)
    >>> seconds > 0, work == solve({"a": 1.0, "c": 1.0}, cfg, k=8)[1]
    (True, True)
    >>> try:
    ...     solve({"a": 1.0, "c": 1.0}, cfg, k=8, maxiter=1)
    ... except SolveFailure as exc:
    ...     print(exc.reason.split(":")[0])
    stalled
    """
    from pyamg.krylov import bicgstab, fgmres  # noqa: PLC0415
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    a, c = float(task["a"]), float(task["c"])
    A = convection_diffusion(int(k), a, c)
    rhs = np.ones(A.shape[0])
    residuals: list[float] = []
    start = time.perf_counter()

    def watch(_x: Any) -> None:
        if residuals and (not math.isfinite(residuals[-1]) or residuals[-1] > DIVERGED * residuals[0]):
            raise SolveFailure(f"diverged: residual {residuals[-1]:.3g} from {residuals[0]:.3g}")

    try:
        # the deadline is innermost: it is cancelled before the other context managers restore their state
        with threadpool_limits(1), np.errstate(all="ignore"), warnings.catch_warnings(), \
                numpy_seeded(dict(task), dict(config), int(k)), deadline(time_limit):
            warnings.simplefilter("ignore")
            ml = build_solver(A, config, symmetric=a == 0.0)
            cycle, accel = config["cycle"], config["accel"]
            if accel == "none":
                x, info = ml.solve(rhs, tol=tol, maxiter=maxiter, cycle=cycle, residuals=residuals,
                                   callback=watch, return_info=True)
            elif accel == "fgmres":
                x, info = fgmres(A, rhs, tol=tol, restart=RESTART, maxiter=max(1, maxiter // RESTART),
                                 M=ml.aspreconditioner(cycle=cycle), residuals=residuals, callback=watch)
            elif accel == "bicgstab":
                x, info = bicgstab(A, rhs, tol=tol, maxiter=maxiter, M=ml.aspreconditioner(cycle=cycle),
                                   residuals=residuals, callback=watch)
            else:
                raise SolveFailure(f"unknown accelerator {accel!r}")
    except SolveTimeout as exc:
        raise SolveTimeout(f"timeout: over {time_limit:g} s") from exc
    except SolveFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - any PyAMG/SciPy error is a failed evaluation
        raise SolveFailure(f"error: {type(exc).__name__}: {exc}") from exc
    elapsed = time.perf_counter() - start
    if not np.all(np.isfinite(x)):
        raise SolveFailure("non-finite solution")
    relative = float(np.linalg.norm(rhs - A @ x) / np.linalg.norm(rhs))
    # 10x slack: a Krylov method's recursive residual drifts from the true one near convergence.
    if info != 0 or not relative <= 10 * tol:
        raise SolveFailure(f"stalled: relative residual {relative:.3g} after {len(residuals) - 1} iterations "
                           f"(tolerance {tol:g})")
    return elapsed, (len(residuals) - 1) * float(ml.cycle_complexity(cycle=cycle))


def solve_time(task: Mapping[str, Any], config: Mapping[str, Any], k: int, **options: Any) -> float:
    """Seconds of AMG setup + solve (see :func:`solve`; ``options`` are its keywords)."""
    return solve(task, config, k, **options)[0]


def solve_work(task: Mapping[str, Any], config: Mapping[str, Any], k: int, **options: Any) -> float:
    """Deterministic work of the solve: iterations × cycle complexity (see :func:`solve`)."""
    return solve(task, config, k, **options)[1]


#: What a solve is tuned for: its wall time, or its deterministic work (a run repeats exactly by seed).
OBJECTIVES: dict[str, Callable[..., float]] = {"runtime": solve_time, "work": solve_work}


# -- tuning ----------------------------------------------------------------------------------------

def one_shot_trainable(config: dict[str, Any], *, b_min: float, b_max: float, k_min: int, k_max: int,
                       time_limit: float | None = None, objective: str = "runtime") -> None:
    """Ray Tune trainable: one solve at grid ``k(config["fidelity"])``; a failure reports a NaN objective."""
    from ray import tune  # noqa: PLC0415

    k = fidelity_to_k(float(config["fidelity"]), b_min, b_max, k_min, k_max)
    task = {"a": config["a"], "c": config["c"]}
    try:
        tune.report({objective: OBJECTIVES[objective](task, config, k, time_limit=time_limit), "k": k})
    except SolveFailure as exc:
        tune.report({objective: float("nan"), "k": k, "failure": exc.reason})


def run_engine(problem: Any, tasks: Sequence[Mapping[str, Any]], args: argparse.Namespace,
               evaluate: Callable[[Mapping[str, Any], Mapping[str, Any], int], float] | None = None,
               executor: Any = None, options: Any = None) -> tuple[Any, list[Any]]:
    """Tune sequentially with the ask/tell engine ``raytuner.strategies.GPTuneBand``.

    Returns the engine and the evaluation records in order (failed solves are failed records).

    ``evaluate(task, config, k)`` defaults to :func:`solve_time` with ``args.time_limit``.
    """
    from raytuner.strategies import GPTuneBand  # noqa: PLC0415

    evaluate = evaluate or functools.partial(OBJECTIVES[args.objective], time_limit=args.time_limit)
    name = problem.objectives[0]
    band = GPTuneBand(problem, tasks, seed=args.seed, b_min=args.b_min, b_max=args.b_max, eta=args.eta,
                      passes=args.passes, budget=args.budget, fidelity_mode="one_shot", executor=executor,
                      options=options)
    records: list[Any] = []
    while not band.finished:
        s = band.ask()
        k = fidelity_to_k(s.fidelity, args.b_min, args.b_max, args.k_min, args.k_max)
        try:
            record = band.tell(s, {name: evaluate(s.task, s.config, k)}, additional_output={"k": k})
        except SolveFailure as exc:
            record = band.tell(s, None, failure=exc.reason, additional_output={"k": k})
        records.append(record)
        value = record.value(name)
        log.info("eval %3d task a=%g c=%g bracket %s rung %s b=%g k=%d: %s", len(records), s.task["a"],
                 s.task["c"], s.provenance.bracket, s.provenance.rung, s.fidelity, k,
                 f"{name} {value:.4f}" if value is not None else f"FAILED ({record.raytuner.failure_message})")
    return band, records


def run_ray(problem: Any, tasks: Sequence[Mapping[str, Any]], args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """Tune through Ray Tune with the trial scheduler ``raytuner.schedulers.GPTuneBandScheduler``.

    Returns the scheduler and the evaluation records it stored (a failed solve reports a NaN runtime,
    which the scheduler stores as a failed evaluation).
    """
    import ray  # noqa: PLC0415
    from ray import tune  # noqa: PLC0415

    from raytuner.schedulers import GPTuneBandScheduler  # noqa: PLC0415
    from raytuner.searchers import TuningProgress  # noqa: PLC0415
    from raytuner.store import JsonStore  # noqa: PLC0415

    store = Path(args.store or tempfile.mkdtemp(prefix="amg_tuning_")).resolve()
    band = GPTuneBandScheduler(problem, tasks, str(store), args.problem, b_min=args.b_min, b_max=args.b_max,
                               eta=args.eta, passes=args.passes, budget=args.budget, fidelity_mode="one_shot",
                               fidelity_key="fidelity", seed=args.seed)
    trainable = tune.with_parameters(one_shot_trainable, b_min=args.b_min, b_max=args.b_max, k_min=args.k_min,
                                     k_max=args.k_max, time_limit=args.time_limit, objective=args.objective)
    local = args.address == "local"           # a fresh local Ray, not a stale or foreign running one
    ray.init(address=args.address, num_cpus=args.concurrent if local else None, include_dashboard=False,
             log_to_driver=False, ignore_reinit_error=True)
    try:
        tune.run(trainable, search_alg=band.searcher(), scheduler=band, num_samples=-1,
                 max_concurrent_trials=args.concurrent, reuse_actors=True, verbose=0,
                 callbacks=[TuningProgress(band)], storage_path=str(store / "ray"), name=args.problem)
    finally:
        ray.shutdown()
    log.info("evaluations stored under %s", store)
    return band, JsonStore(store).evaluations(args.problem)


def print_summary(tasks: Sequence[Mapping[str, Any]], records: Sequence[Any], best: Sequence[Any],
                  k_max: int, objective: str = "runtime") -> None:
    """Evaluations, failures and normalised cost per task, then the best configuration at b_max (k = k_max)."""
    print(f"\nAt k = {k_max} (b_max):")
    from raytuner.analysis import task_summary  # noqa: PLC0415

    print("\n".join(task_summary(tasks, records, best, objective)))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small run: 2 tasks, k = 10..20, [b_min, b_max, eta] = [1, 4, 2]")
    parser.add_argument("--runner", choices=["ray", "engine"], default="ray",
                        help="ray: Ray Tune + raytuner.schedulers.GPTuneBandScheduler; engine: sequential ask/tell")
    parser.add_argument("--tasks", type=float, nargs="+", default=None,
                        help="task coefficients as a flat list a1 c1 a2 c2 ... (default: 3 tasks, 2 with --quick)")
    parser.add_argument("--b-min", type=float, default=1.0)
    parser.add_argument("--b-max", type=float, default=None, help="default 8, 4 with --quick")
    parser.add_argument("--eta", type=int, default=2)
    parser.add_argument("--passes", type=int, default=None, help="default 1 (with --budget: as the budget allows)")
    parser.add_argument("--budget", type=float, default=None,
                        help="normalised cost per task at which each task ends")
    parser.add_argument("--objective", choices=sorted(OBJECTIVES), default="runtime",
                        help="runtime: wall time of setup + solve; work: iterations x cycle complexity (deterministic)")
    parser.add_argument("--k-min", type=int, default=10)
    parser.add_argument("--k-max", type=int, default=None, help="grid size at b_max (default 40, 20 with --quick)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="seconds before a solve counts as failed (default 15, 3 with --quick)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrent", type=int, default=2, help="trials at once under Ray (and Ray CPUs)")
    parser.add_argument("--address", default="local",
                        help="Ray address: 'local' starts a fresh local Ray, 'auto' or host:port joins a cluster")
    parser.add_argument("--store", default=None, help="JSON store directory for the Ray runner (default: temp)")
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
    from raytuner.space import ProblemSpace  # noqa: PLC0415
    from raytuner.strategies import BanditStructure  # noqa: PLC0415

    problem = ProblemSpace.parse(amg_problem(args.objective))
    tasks = args.task_list
    runner = args.runner
    fidelities = BanditStructure.hyperband(args.b_min, args.b_max, args.eta).fidelities
    log.info("runner %s: %d tasks, [b_min, b_max, eta] = [%g, %g, %d], grid sizes k = %s", runner, len(tasks),
             args.b_min, args.b_max, args.eta,
             [fidelity_to_k(b, args.b_min, args.b_max, args.k_min, args.k_max) for b in fidelities])
    start = time.perf_counter()
    band, records = (run_ray if runner == "ray" else run_engine)(problem, tasks, args)
    elapsed = time.perf_counter() - start
    best = band.best()
    print_summary(tasks, records, best, args.k_max, args.objective)
    print(f"tuning took {elapsed:.1f} s")
    return best


if __name__ == "__main__":
    main()
