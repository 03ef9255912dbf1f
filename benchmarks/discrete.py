"""``python -m benchmarks discrete``: discrete BO on measured GPU-kernel spaces against Kernel Tuner's own strategies.

Run it as::

    python -m benchmarks discrete --out DIR [--quick]

The protocol is Willemsen et al. (2021), section IV-A, on Kernel Tuner cache
files (``../shared/data/kernel_tuner``: gemm on an RTX 3090, convolution on
an A100, point-in-polygon on an RTX 3090, dedispersion on an A100). A cache
is a brute-force measurement of every valid configuration, read as a lookup
table; a configuration whose ``time`` is an error string failed to compile or
run, and evaluating it costs an evaluation like any other.

Every method gets 220 unique evaluations (raytuner's own start with 20
initial ones), ``repeats`` times with seeds ``0 .. repeats - 1``:

- raytuner's :class:`~raytuner.engines.discrete.DiscreteBO` with the
  *advanced multi*, *multi* and EI acquisition (Table I defaults);
- Kernel Tuner 1.5 itself in simulation mode on the same cache:
  ``bayes_opt`` (``multi-advanced``, ``multi``, ``ei``),
  ``genetic_algorithm``, ``simulated_annealing``, ``mls``, ``random_sample``
  (:mod:`benchmarks.discrete_peers`);
- Optuna's TPE.

A run's MAE is ``1/10 sum_{i=2..11} |f(x+_{20i}) - f(x')|``, the distance of
the best time found after 40, 60, ..., 220 evaluations from the kernel's
optimum. A method's MAE on a kernel is the mean over its runs; its deviation
factor on a kernel is that MAE over the mean MAE of all methods on the kernel,
and its **MDF** the mean of those factors over the kernels (lower is better).
The MDF compares the methods of one run: it is a ratio to the peers.

``suggest_ms_median`` is the tuner's own time per suggestion: for raytuner,
the median time of an ``ask`` that fits and searches the model (a round of a
portfolio; the other asks of the round only pop a queue); for the peers, a
run's wall time (lookups included) over its evaluations, median over runs.

Jobs (one method, kernel and seed each) run on ``workers`` processes; each
finished job is appended to ``DIR/runs.jsonl``, and a rerun with the same
settings skips the jobs found there, so an interrupted benchmark resumes.
``--quick`` runs 2 repeats of every method (full: 10).

Example:
    >>> from pathlib import Path
    >>> s = Settings(kernels=("pnpoly_RTX_3090",), methods=("raytuner_ei", "kt_random_sample"), repeats=1)
    >>> results = run(Path("bench_out/discrete"), settings=s)            # doctest: +SKIP
    >>> [row["method"] for row in results["rows"]]                       # doctest: +SKIP
    ['raytuner_ei', 'kt_random_sample']
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.data import find
from benchmarks.discrete_peers import KERNEL_TUNER_METHODS, Trace, run_kernel_tuner, run_optuna_tpe
from benchmarks.kernel_cache import KernelCache, load_cache
from benchmarks.report import finish_run, machine_at_start
from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation

__all__ = [
    "Settings",
    "FULL",
    "QUICK",
    "KERNELS",
    "OURS",
    "METHODS",
    "run",
    "run_job",
    "run_raytuner",
    "run_mae",
    "summarise",
]

log = logging.getLogger(__name__)

#: The cache files (without ``.json.gz``) the benchmark tunes.
KERNELS: tuple[str, ...] = ("gemm_RTX_3090", "convolution_A100", "pnpoly_RTX_3090", "dedispersion_A100")
#: raytuner's methods: row name -> DiscreteBO options.
OURS: dict[str, dict[str, Any]] = {
    "raytuner_advanced_multi": {"method": "advanced_multi"},
    "raytuner_multi": {"method": "multi"},
    "raytuner_ei": {"method": "ei"},
}
#: Every row, raytuner's first.
METHODS: tuple[str, ...] = (*OURS, *KERNEL_TUNER_METHODS, "optuna_tpe")


@dataclass(frozen=True)
class Settings:
    """What one benchmark run covers (the paper's protocol by default)."""

    kernels: tuple[str, ...] = KERNELS
    methods: tuple[str, ...] = METHODS
    repeats: int = 10
    n_initial: int = 20
    evaluations: int = 220
    checkpoints: tuple[int, ...] = tuple(range(40, 221, 20))
    workers: int = 2

    def signature(self) -> dict[str, Any]:
        """What makes two runs' jobs interchangeable (everything but the kernels, methods, repeats, workers)."""
        return {"n_initial": self.n_initial, "evaluations": self.evaluations, "checkpoints": list(self.checkpoints)}


FULL = Settings()
QUICK = Settings(repeats=2)


@lru_cache(maxsize=8)
def _cache(kernel: str) -> KernelCache:
    return load_cache(find(f"kernel_tuner/{kernel}.json.gz"))


def run_raytuner(
    cache: KernelCache, options: dict[str, Any], max_fevals: int, seed: int, n_initial: int = 20
) -> tuple[Trace, list[float]]:
    """Tune ``cache`` with :class:`~raytuner.engines.discrete.DiscreteBO`; the trace and model-ask times (ms).

    Args:
        cache: the Kernel Tuner cache that answers the evaluations.
        options: the engine's options.
        max_fevals: how many evaluations to spend.
        seed: the engine's seed.
        n_initial: random evaluations before the model's first ask (default 20).
    """
    from raytuner.engines.discrete import DiscreteBO

    engine = DiscreteBO(cache.problem(), seed=seed, n_initial=n_initial, candidates=cache.configs, **options)
    search = engine.search()
    trace: Trace = []
    ask_ms: list[float] = []
    for _ in range(min(max_fevals, len(cache.configs))):
        computes = not search.queue and len(search.values) >= n_initial
        started = time.perf_counter()
        s = engine.ask()
        elapsed = (time.perf_counter() - started) * 1000
        if computes and s.provenance.proposer == "model":
            ask_ms.append(elapsed)
        t = cache.time(s.config)
        engine.tell(
            FunctionEvaluation.create(
                s.task,
                s.config,
                None if t is None else {"time": t},
                failure="invalid configuration" if t is None else None,
                provenance=s.provenance,
            )
        )
        trace.append((s.config, t))
    return trace, ask_ms


def best_so_far(trace: Trace, length: int) -> list[float | None]:
    """The best time after each evaluation (``None`` before the first success), padded to ``length``."""
    out: list[float | None] = []
    best: float | None = None
    for _, t in trace[:length]:
        if t is not None and (best is None or t < best):
            best = t
        out.append(best)
    return out + [best] * (length - len(out))


def run_mae(curve: Sequence[float | None], optimum: float, checkpoints: Sequence[int], worst: float) -> float:
    """``mean_i |f(x+_{c_i}) - f(x')|`` over the checkpoints; no success yet counts as the worst time.

    Args:
        curve: the best time found after each evaluation (``None``: no success yet).
        optimum: the best time in the cache, ``f(x')``.
        checkpoints: the evaluation counts ``c_i`` to compare at.
        worst: the time that counts for a checkpoint with no success yet.
    """
    return float(np.mean([abs((worst if (v := curve[c - 1]) is None else v) - optimum) for c in checkpoints]))


def run_job(method: str, kernel: str, seed: int, settings: Settings) -> dict[str, Any]:
    """One run of ``method`` on ``kernel`` with ``seed``: its best-so-far curve, MAE and timings.

    Args:
        method: the tuner (a key of the benchmark's methods: raytuner's or a peer's).
        kernel: the kernel whose cache is tuned.
        seed: the run's seed.
        settings: the benchmark's settings (evaluations, checkpoints, data folder).
    """
    cache = _cache(kernel)
    started = time.perf_counter()
    ask_ms: list[float] = []
    if method in OURS:
        trace, ask_ms = run_raytuner(cache, OURS[method], settings.evaluations, seed, settings.n_initial)
    elif method in KERNEL_TUNER_METHODS:
        trace = run_kernel_tuner(cache, method, settings.evaluations, seed)
    elif method == "optuna_tpe":
        trace = run_optuna_tpe(cache, settings.evaluations, seed, n_startup=settings.n_initial)
    else:
        raise InvalidInputError("method", f"unknown method {method!r}", allowed=list(METHODS))
    wall = time.perf_counter() - started
    curve = best_so_far(trace, settings.evaluations)
    worst = max(t for t in (cache.time(c) for c in cache.configs) if t is not None)
    return {
        "method": method,
        "kernel": kernel,
        "seed": seed,
        "evaluations": len(trace),
        "failed": sum(t is None for _, t in trace),
        "curve": curve,
        "mae": run_mae(curve, cache.optimum, settings.checkpoints, worst),
        "wall_s": round(wall, 3),
        "ms_per_suggestion": 1000 * wall / max(len(trace), 1),
        "model_ask_ms": ask_ms,
        "settings": settings.signature(),
    }


def _init_worker(level: int) -> None:
    logging.basicConfig(level=level)
    from threadpoolctl import threadpool_limits

    globals()["_BLAS_LIMIT"] = threadpool_limits(1)  # workers share the cores: one BLAS thread each


def _load_done(path: Path, settings: Settings) -> dict[tuple[str, str, int], dict[str, Any]]:
    done: dict[tuple[str, str, int], dict[str, Any]] = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            job = json.loads(line)
        except json.JSONDecodeError:
            log.warning("skipping a damaged line of %s (an interrupted write)", path)
            continue
        if job.get("settings") == settings.signature():
            done[(job["method"], job["kernel"], int(job["seed"]))] = job
    return done


def _run_jobs(out: Path, settings: Settings) -> list[dict[str, Any]]:
    log_path = out / "runs.jsonl"
    done = _load_done(log_path, settings)
    wanted = [(m, k, s) for k in settings.kernels for m in settings.methods for s in range(settings.repeats)]
    todo = [job for job in wanted if job not in done]
    log.info("discrete benchmark: %d jobs, %d already in %s", len(wanted), len(wanted) - len(todo), log_path)
    out.mkdir(parents=True, exist_ok=True)
    # the slow jobs (Kernel Tuner's bayes_opt, gemm) first, so the pool drains evenly
    todo.sort(key=lambda j: (not j[0].startswith("kt_bayes"), j[1] != "gemm_RTX_3090"))
    with open(log_path, "a", encoding="utf-8") as sink:

        def keep(job: dict[str, Any]) -> None:
            done[(job["method"], job["kernel"], job["seed"])] = job
            sink.write(json.dumps(job) + "\n")
            sink.flush()
            log.info(
                "discrete benchmark: %s on %s seed %d: MAE %.4g in %.1f s (%d of %d)",
                job["method"],
                job["kernel"],
                job["seed"],
                job["mae"],
                job["wall_s"],
                len(done),
                len(wanted),
            )

        if settings.workers <= 1:
            for job in todo:
                keep(run_job(*job, settings))
        else:
            level = logging.getLogger("raytuner").getEffectiveLevel()
            with ProcessPoolExecutor(
                max_workers=settings.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(level,),
            ) as pool:
                futures = [pool.submit(run_job, *job, settings) for job in todo]
                for future in as_completed(futures):
                    keep(future.result())
    return [done[job] for job in wanted]


def summarise(jobs: Sequence[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """The ``kernels`` and ``rows`` of ``results.json`` (MAE per kernel, MDF, timings) from finished jobs.

    Args:
        jobs: the finished jobs, as :func:`run_job` returns them.
        settings: the benchmark's settings.
    """
    kernels = [k for k in settings.kernels if any(j["kernel"] == k for j in jobs)]
    methods = [m for m in settings.methods if any(j["method"] == m for j in jobs)]
    mae = {
        m: {k: float(np.mean([j["mae"] for j in jobs if j["method"] == m and j["kernel"] == k])) for k in kernels}
        for m in methods
    }
    factors = {m: {k: mae[m][k] / float(np.mean([mae[o][k] for o in methods])) for k in kernels} for m in methods}
    rows = []
    for m in methods:
        mine = [j for j in jobs if j["method"] == m]
        model_ms = [x for j in mine for x in j["model_ask_ms"]]
        timing = model_ms if m in OURS else [j["ms_per_suggestion"] for j in mine]
        rows.append(
            {
                "method": m,
                "family": "raytuner" if m in OURS else ("optuna" if m == "optuna_tpe" else "kernel_tuner"),
                "mdf": round(float(np.mean(list(factors[m].values()))), 4),
                "mdf_sd": round(float(np.std(list(factors[m].values()))), 4),
                "mae_by_kernel": {k: round(v, 5) for k, v in mae[m].items()},
                "mae_sd_by_kernel": {
                    k: round(float(np.std([j["mae"] for j in mine if j["kernel"] == k])), 5) for k in kernels
                },
                "suggest_ms_median": round(float(np.median(timing)), 3) if timing else None,
                "runs": len(mine),
                "failed_evaluations_mean": round(float(np.mean([j["failed"] for j in mine])), 2),
            }
        )
    return {"kernels": kernels, "rows": rows}


def goals(summary: dict[str, Any], jobs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The issue's three goals, each with the measured figures and whether it is met."""
    ours = [r for r in summary["rows"] if r["family"] == "raytuner"]
    kt_bo = [r for r in summary["rows"] if r["method"].startswith("kt_bayes_opt")]
    best_ours = min(ours, key=lambda r: r["mdf"]) if ours else None
    best_all = min(summary["rows"], key=lambda r: r["mdf"]) if summary["rows"] else None
    out: dict[str, Any] = {}
    if best_ours and best_all:
        out["lowest_mdf"] = {
            "best_method": best_all["method"],
            "best_raytuner": best_ours["method"],
            "met": best_all["family"] == "raytuner",
        }
    if best_ours and kt_bo:
        best_kt = min(kt_bo, key=lambda r: r["mdf"])
        ratio = best_ours["mdf"] / best_kt["mdf"]
        out["below_kernel_tuner_bayes_opt"] = {
            "raytuner": best_ours["method"],
            "kernel_tuner": best_kt["method"],
            "mdf_ratio": round(ratio, 4),
            "required_at_most": 0.8,
            "met": ratio <= 0.8,
        }
    gemm_ms = [x for j in jobs if j["method"] in OURS and j["kernel"] == "gemm_RTX_3090" for x in j["model_ask_ms"]]
    if gemm_ms:
        out["suggest_ms_gemm"] = {
            "candidates": len(_cache("gemm_RTX_3090").configs),
            "median": round(float(np.median(gemm_ms)), 3),
            "p95": round(float(np.percentile(gemm_ms, 95)), 3),
            "max": round(float(np.max(gemm_ms)), 3),
            "required_at_most": 200.0,
            "met": float(np.median(gemm_ms)) <= 200.0,
        }
    return out


def run(out: Path, quick: bool = False, settings: Settings | None = None) -> dict[str, Any]:
    """Run the discrete benchmark; write ``out/results.json``, ``out/report.md`` and a plot per kernel.

    Args:
        out: where ``results.json``, ``report.md`` and the PNG files go (made if missing).
        quick: two repeats per kernel and method, :data:`QUICK` (default ``False``: :data:`FULL`).
        settings: the kernels, methods, repeats and evaluations to run; overrides ``quick`` (default ``None``).
    """
    from benchmarks.discrete_report import render_report, save_plots

    out = Path(out)
    s = settings if settings is not None else (QUICK if quick else FULL)
    unknown = [m for m in s.methods if m not in METHODS]
    if unknown:
        raise InvalidInputError("methods", f"unknown method {unknown[0]!r}", allowed=list(METHODS))
    started = time.perf_counter()
    machine = machine_at_start()
    jobs = _run_jobs(out, s)
    summary = summarise(jobs, s)
    kernels = {
        k: {
            "configurations": len(_cache(k).configs),
            "failed": _cache(k).failed,
            "optimum_ms": _cache(k).optimum,
            "device": _cache(k).device,
        }
        for k in summary["kernels"]
    }
    results = {
        **summary,
        "goals": goals(summary, jobs),
        "kernel_details": kernels,
        "plots": save_plots(jobs, s, kernels, out),
        "settings": {**asdict(s), "seeds": list(range(s.repeats))},
        "machine": machine,
    }
    return finish_run(out, "discrete", results, render_report, quick=quick, started=started)
