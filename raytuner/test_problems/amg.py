"""PyAMG on 3-D convection-diffusion: the problem and the solver behind ``examples/amg_tuning.py`` and the benchmarks.

The hypre/BoomerAMG case of the GPTuneBand paper (paper 004, section 5.2),
with PyAMG in place of hypre: solve -cΔu + a(u_x + u_y + u_z) = 1 on the unit
cube with zero Dirichlet boundary, on a k³ grid of interior points (7-point
finite differences; first-order upwind convection, so the matrix is an
M-matrix for any a >= 0 and c > 0). The tasks are coefficient pairs (a, c).
A solve (:func:`solve`) reports its wall time (setup plus solve to relative
residual 1e-8), its deterministic work (in fine-grid matrix-vector products:
iterations × the cost of a cycle with the configured smoothing, with which a
run repeats exactly by seed) and the hierarchy's operator complexity
(its memory, relative to the fine matrix). The tuning parameters mirror
BoomerAMG's: strength threshold, AMG method (classical Ruge-Stuben or
smoothed aggregation), RS coarsening and interpolation, SA aggregation,
smoother, its weight, pre/post sweeps, maximum coarse size, cycle type and
Krylov acceleration. Two constraints keep AMLI cycles where PyAMG takes them
(standalone or under fgmres, and not in a smoothed-aggregation hierarchy of
a nonsymmetric matrix).

A solve that raises, diverges, stalls at its iteration limit, runs past its
time limit or ends with a non-finite or unconverged solution raises
:class:`SolveFailure`: a failed evaluation, never a crash.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import inspect
import json
import math
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, ParamSpec

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

__all__ = [
    "AMG_PROBLEM",
    "amg_problem",
    "DEFAULT_TASKS",
    "TOL",
    "MAXITER",
    "SolveFailure",
    "SolveTimeout",
    "Solve",
    "numpy_seeded",
    "deadline",
    "convection_diffusion",
    "fidelity_to_k",
    "build_solver",
    "solve",
    "solve_time",
    "solve_work",
    "cycle_cost",
    "OBJECTIVES",
]

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

    Args:
        objective: the output tuned.

    >>> amg_problem("work")["output_space"]
    [{'name': 'work', 'type': 'real', 'goal': 'minimize'}]
    """
    return {**AMG_PROBLEM, "output_space": [{"name": objective, "type": "real", "goal": "minimize"}]}


#: Tasks (a, c) tuned by default: diffusion-dominated to convection-dominated.
DEFAULT_TASKS: list[dict[str, float]] = [{"a": 0.0, "c": 1.0}, {"a": 5.0, "c": 1.0}, {"a": 10.0, "c": 0.5}]

P = ParamSpec("P")

TOL = 1e-8  #: relative residual the solve must reach
MAXITER = 200  #: cycles (or Krylov iterations) before a solve counts as stalled
DIVERGED = 1e6  #: a residual this many times the initial one counts as divergence
RESTART = 30  #: fgmres restart length


class SolveFailure(RuntimeError):
    """An AMG solve that gave no usable time; ``reason`` says why (diverged, stalled, error...).

    Args:
        reason: why, starting with its kind (``diverged``, ``stalled``, ``timeout``, ``error``...).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SolveTimeout(SolveFailure):
    """A solve (setup included) that ran past its time limit.

    Args:
        reason: the message.
    """

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
    any thread, e.g. the one Ray Tune runs a function trainable in. A block
    past its limit always ends in :class:`SolveTimeout`: one that ends before
    the exception arrives raises it on leaving.

    Args:
        seconds: the time limit (``None``: none).

    >>> try:
    ...     with deadline(0.05):
    ...         while True:
    ...             pass
    ... except SolveTimeout as exc:
    ...     print(exc.reason)
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
    started = time.monotonic()
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        if fired.is_set():  # not delivered yet: cancel it
            ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)
    # the block ended in time for the watcher (one long C call, or a loaded machine that ran the watcher late):
    # past the limit is past it all the same
    if fired.is_set() or time.monotonic() - started > seconds:
        raise SolveTimeout()


def convection_diffusion(k: int, a: float, c: float) -> sp.csr_matrix:
    """The k³ x k³ upwind finite-difference matrix of -cΔu + a(u_x + u_y + u_z), Dirichlet boundary.

    Args:
        k: grid points per dimension.
        a: the convection coefficient.
        c: the diffusion coefficient.

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
    return (sp.kron(sp.kron(d1, eye), eye) + sp.kron(sp.kron(eye, d1), eye) + sp.kron(sp.kron(eye, eye), d1)).tocsr()


def fidelity_to_k(b: float, b_min: float, b_max: float, k_min: int, k_max: int) -> int:
    """The grid size k of fidelity b: k³ interpolates k_min³ (at b_min) and k_max³ (at b_max) linearly.

    Args:
        b: the fidelity.
        b_min: the lowest fidelity.
        b_max: the highest fidelity.
        k_min: the grid at ``b_min``.
        k_max: the grid at ``b_max``.

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
    """The PyAMG hierarchy (setup phase) of a configuration.

    Args:
        A: the matrix.
        config: the configuration.
        symmetric: whether ``A`` is symmetric (a = 0).
    """
    import pyamg  # only the solve needs it

    theta = float(config["strength"])
    common = dict(
        presmoother=_smoother(config, int(config["pre_sweeps"])),
        postsmoother=_smoother(config, int(config["post_sweeps"])),
        max_coarse=int(config["max_coarse"]),
        max_levels=25,
        coarse_solver="splu",
    )
    if config["method"] == "ruge_stuben":
        return pyamg.ruge_stuben_solver(
            A,
            strength=("classical", {"theta": theta}),
            CF=config["coarsening"],
            interpolation=config["interpolation"],
            **common,
        )
    return pyamg.smoothed_aggregation_solver(
        A,
        symmetry="hermitian" if symmetric else "nonsymmetric",
        strength=("symmetric", {"theta": theta}),
        aggregate=config["aggregate"],
        **common,
    )


class Solve(NamedTuple):
    """What one solve measured.

    Args:
        seconds: wall time of setup and solve (it varies from run to run).
        work: the solve's cost in fine-grid matrix-vector products, deterministic: iterations times the cost
            of a preconditioner application (:func:`cycle_cost`), twice per iteration under BiCGStab.
        memory: the hierarchy's nonzeros (every level's operator, and the LU factors of the coarsest level's
            direct solve) over the fine matrix's: its operator complexity with the coarse solve counted, so a
            hierarchy that stops coarsening is no free lunch; deterministic.
    """

    seconds: float
    work: float
    memory: float


def solve(
    task: Mapping[str, Any],
    config: Mapping[str, Any],
    k: int,
    *,
    tol: float = TOL,
    maxiter: int = MAXITER,
    time_limit: float | None = None,
) -> Solve:
    """AMG setup + solve of task (a, c) on a k³ grid to relative residual ``tol``.

    Raises :class:`SolveFailure` when the solve raises, diverges, stalls
    (``maxiter`` reached above ``tol``), runs past ``time_limit`` seconds, or
    ends with a non-finite or unconverged solution; nothing else escapes.

    Args:
        task: the coefficients ``a`` and ``c``.
        config: the configuration.
        k: grid points per dimension.
        tol: the relative residual to reach.
        maxiter: cycles (or Krylov iterations) before the solve counts as stalled.
        time_limit: seconds before it counts as failed (``None``: no limit).

    >>> cfg = dict(strength=0.25, method="ruge_stuben", coarsening="RS", interpolation="classical",
    ...            aggregate="standard", smoother="gauss_seidel", relax_weight=1.0, pre_sweeps=1,
    ...            post_sweeps=1, max_coarse=50, cycle="V", accel="none")
    >>> seconds, work, memory = solve({"a": 1.0, "c": 1.0}, cfg, k=8)
    >>> seconds > 0, work == solve({"a": 1.0, "c": 1.0}, cfg, k=8).work, memory > 1
    (True, True, True)
    >>> try:
    ...     solve({"a": 1.0, "c": 1.0}, cfg, k=8, maxiter=1)
    ... except SolveFailure as exc:
    ...     print(exc.reason.split(":")[0])
    stalled
    """
    from pyamg.krylov import bicgstab, fgmres
    from threadpoolctl import threadpool_limits

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
        with (
            threadpool_limits(1),
            np.errstate(all="ignore"),
            warnings.catch_warnings(),
            numpy_seeded(dict(task), dict(config), int(k)),
            deadline(time_limit),
        ):
            warnings.simplefilter("ignore")
            ml = build_solver(A, config, symmetric=a == 0.0)
            cycle, accel = config["cycle"], config["accel"]
            if accel == "none":
                x, info = ml.solve(
                    rhs, tol=tol, maxiter=maxiter, cycle=cycle, residuals=residuals, callback=watch, return_info=True
                )
            elif accel == "fgmres":
                x, info = fgmres(
                    A,
                    rhs,
                    tol=tol,
                    restart=RESTART,
                    maxiter=max(1, maxiter // RESTART),
                    M=ml.aspreconditioner(cycle=cycle),
                    residuals=residuals,
                    callback=watch,
                )
            elif accel == "bicgstab":
                x, info = bicgstab(
                    A,
                    rhs,
                    tol=tol,
                    maxiter=maxiter,
                    M=ml.aspreconditioner(cycle=cycle),
                    residuals=residuals,
                    callback=watch,
                )
            else:
                raise SolveFailure(f"unknown accelerator {accel!r}")
            per_cycle, stored = cycle_cost(ml, config), _stored(ml)  # inside: an error here is a failure too
    except SolveTimeout as exc:
        raise SolveTimeout(f"timeout: over {time_limit:g} s") from exc
    except SolveFailure:
        raise
    except Exception as exc:  # any PyAMG/SciPy error is a failed evaluation
        raise SolveFailure(f"error: {type(exc).__name__}: {exc}") from exc
    elapsed = time.perf_counter() - start
    if not np.all(np.isfinite(x)):
        raise SolveFailure("non-finite solution")
    relative = float(np.linalg.norm(rhs - A @ x) / np.linalg.norm(rhs))
    # 10x slack: a Krylov method's recursive residual drifts from the true one near convergence.
    if info != 0 or not relative <= 10 * tol:
        raise SolveFailure(
            f"stalled: relative residual {relative:.3g} after {len(residuals) - 1} iterations (tolerance {tol:g})"
        )
    applications = (len(residuals) - 1) * (2 if accel == "bicgstab" else 1)
    return Solve(elapsed, applications * per_cycle, stored / A.nnz)


#: One sweep of each smoother in fine-grid matrix-vector products (the symmetric sweeps go forward and back).
SWEEP_COST = {"gauss_seidel": 2.0, "sor": 2.0, "jacobi": 1.0}


def cycle_cost(ml: Any, config: Mapping[str, Any]) -> float:
    """One cycle of ``config``'s hierarchy in fine-grid matrix-vector products.

    PyAMG's cycle complexity counts one simple relaxation before and one after
    on every level; this scales it by what the configured smoothing costs
    (sweeps, a symmetric sweep counted twice, a Chebyshev polynomial of degree
    d as d products), so a cheap hierarchy with heavy smoothing is no free lunch.

    Args:
        ml: the PyAMG hierarchy.
        config: its configuration.
    """

    def smoothing(sweeps: int) -> float:
        name = config["smoother"]
        return float(sweeps + 1) if name == "chebyshev" else sweeps * SWEEP_COST[name]

    scale = (smoothing(int(config["pre_sweeps"])) + smoothing(int(config["post_sweeps"]))) / 2
    return float(ml.cycle_complexity(cycle=config["cycle"])) * scale


def _stored(ml: Any) -> int:
    """The nonzeros a hierarchy keeps: every level's operator and the coarsest level's LU factors.

    A singular coarsest operator (no LU) counts as dense, as the pseudo-inverse that replaces it is.
    """
    coarsest = ml.levels[-1].A
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            factors = splu(coarsest.tocsc(), permc_spec="COLAMD")
        coarse = factors.L.nnz + factors.U.nnz
    except RuntimeError:  # exactly singular
        coarse = coarsest.shape[0] ** 2
    return sum(level.A.nnz for level in ml.levels) + coarse


def _measure(run: Callable[P, Solve], field: str, name: str, summary: str) -> Callable[P, float]:
    """An objective: ``run`` (:func:`solve`) with its arguments, returning the ``field`` of its :class:`Solve`.

    Args:
        run: the solve.
        field: the :class:`Solve` field returned.
        name: the objective's name.
        summary: the objective's docstring, before ``run``'s ``Args:``.
    """

    def objective(*args: P.args, **kwargs: P.kwargs) -> float:
        return float(getattr(run(*args, **kwargs), field))

    arguments = (run.__doc__ or "").split("\n\n    Args:\n", 1)[1].split("\n\n", 1)[0]
    objective.__doc__ = f"{summary}\n\n    Args:\n{arguments}\n    "
    objective.__signature__ = inspect.signature(run).replace(return_annotation="float")  # type: ignore[attr-defined]
    objective.__name__ = objective.__qualname__ = name
    return objective


solve_time = _measure(
    solve, "seconds", "solve_time", "Seconds of AMG setup + solve (:func:`solve`, whose failures it raises)."
)
solve_work = _measure(
    solve, "work", "solve_work", "Deterministic work of :func:`solve` in fine-grid matrix-vector products."
)


#: What a solve is tuned for: its wall time, or its deterministic work (a run repeats exactly by seed).
OBJECTIVES: dict[str, Callable[..., float]] = {"runtime": solve_time, "work": solve_work}
