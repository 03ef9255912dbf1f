"""Peer tuners of ``python -m benchmarks discrete``: Kernel Tuner's strategies and Optuna's TPE on a Kernel Tuner cache.

Each runner tunes one :class:`~benchmarks.kernel_cache.KernelCache` (a
measured search space, read as a lookup table) for ``max_fevals`` unique
evaluations and returns the :data:`Trace`: the unique configurations it
evaluated, in order, each with its time in ms (``None`` for a configuration
that failed to compile or run). Every stored configuration is in the valid
space, failed ones included, so a failed configuration costs a peer one
evaluation, as it costs raytuner's own tuners.

- :func:`run_kernel_tuner` runs a Kernel Tuner 1.5 strategy in simulation
  mode (:data:`KERNEL_TUNER_METHODS` names the rows): Kernel Tuner itself
  proposes the configurations and reads their times from an uncompressed copy
  of the cache, written once per process and cache file to a temporary folder.
- :func:`run_optuna_tpe` runs Optuna's TPE with one categorical per
  parameter in an ask/tell loop. A proposal outside the valid space is told the
  worst time seen so far, which teaches TPE the region, and costs no
  evaluation (a restriction the tuner could know beforehand); a repeated
  proposal is told its known value, also at no cost.

Both seed every run, so the same seed gives the same trace. Kernel Tuner's
``bayes_opt`` draws its initial Latin-hypercube sample from a SciPy sampler
that ignores the global seeds; :func:`run_kernel_tuner` hands that sampler a
generator seeded from ``seed`` (the strategy is otherwise unchanged), which
makes its runs reproducible too.

Example (a cache built from a document here; :func:`~benchmarks.kernel_cache.load_cache` reads a file):
    >>> cache = KernelCache.from_document({
    ...     "device_name": "GPU", "kernel_name": "k", "problem_size": [64], "tune_params_keys": ["bx", "tile"],
    ...     "tune_params": {"bx": [32, 64, 128], "tile": [1, 2]},
    ...     "cache": {"32,1": {"time": 3.0}, "64,1": {"time": 2.0}, "128,1": {"time": 2.5},
    ...               "64,2": {"time": 1.5}, "128,2": {"time": "CompilationFailedConfig"}}})
    >>> trace = run_optuna_tpe(cache, max_fevals=5, seed=0)     # the whole valid space, "32,2" is not in it
    >>> len(trace), sorted(t for _, t in trace if t is not None), sum(t is None for _, t in trace)
    (5, [1.5, 2.0, 2.5, 3.0], 1)
    >>> trace = run_kernel_tuner(cache, "kt_random_sample", max_fevals=3, seed=0)   # doctest: +SKIP
    >>> len(trace), all(config in cache for config, _ in trace)                      # doctest: +SKIP
    (3, True)
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import logging
import math
import random
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.kernel_cache import FAILURE_STRINGS, KernelCache
from raytuner.errors import InvalidInputError

__all__ = ["Trace", "KERNEL_TUNER_METHODS", "run_kernel_tuner", "run_optuna_tpe"]

log = logging.getLogger(__name__)

#: Unique evaluations in order: (configuration, time in ms or ``None`` for a failed configuration).
Trace = list[tuple[dict[str, Any], float | None]]

#: Row name -> (Kernel Tuner strategy, its strategy_options); ``max_fevals`` is added per run.
KERNEL_TUNER_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "kt_bayes_opt_multi_advanced": ("bayes_opt", {"method": "multi-advanced"}),
    "kt_bayes_opt_multi": ("bayes_opt", {"method": "multi"}),
    "kt_bayes_opt_ei": ("bayes_opt", {"method": "ei"}),
    "kt_genetic_algorithm": ("genetic_algorithm", {}),
    "kt_simulated_annealing": ("simulated_annealing", {}),
    "kt_mls": ("mls", {}),
    "kt_random_sample": ("random_sample", {}),
}

#: Consecutive proposals that cost no evaluation before :func:`run_optuna_tpe` evaluates a random one instead.
MAX_FREE_PROPOSALS = 200

# The measurements Kernel Tuner's simulation runner reads besides the parameters and ``time``.
_KT_TIMINGS = ("compile_time", "verification_time", "benchmark_time")


# -- the uncompressed cache copies Kernel Tuner reads ----------------------------------------------------
class _SimulationFiles:
    """The uncompressed copy of each cache, written once per process and cache file, removed at exit."""

    def __init__(self) -> None:
        self._tmp: Path | None = None
        # key -> (path, the cache it was written for: a weak reference for a cache without a file)
        self._written: dict[tuple[Any, ...], tuple[Path, Any]] = {}

    def _folder(self, workdir: Path | None) -> Path:
        if workdir is not None:
            workdir = Path(workdir)
            workdir.mkdir(parents=True, exist_ok=True)
            return workdir
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="raytuner_kt_sim_"))
            atexit.register(shutil.rmtree, self._tmp, True)
        return self._tmp

    def path(self, cache: KernelCache, workdir: Path | None) -> Path:
        """The copy of ``cache`` (written now when there is none yet, or when it was changed since)."""
        source = Path(cache.source)
        folder = self._folder(workdir)
        if source.is_file():  # one copy per cache file (and version of it), whichever object read it
            stat = source.stat()
            key: tuple[Any, ...] = (str(folder), str(source.resolve()), stat.st_mtime_ns, stat.st_size)
            owner = None
        else:  # a cache built from a document: one copy per object
            key, owner = (str(folder), "id", id(cache)), weakref.ref(cache)
        known = self._written.get(key)
        if known is not None and (owner is None or known[1]() is cache) and _intact(known[0]):
            return known[0]
        path = folder / f"{_file_stem(cache)}_{len(self._written)}.json"
        _write_simulation_cache(cache, path)
        self._written[key] = (path, owner)
        log.debug("wrote Kernel Tuner's simulation copy of %s to %s", cache.source, path)
        return path


def _budget(max_fevals: int) -> int:
    """``max_fevals`` as an ``int``; less than 1 raises :class:`~raytuner.errors.InvalidInputError`."""
    if int(max_fevals) < 1:
        raise InvalidInputError("max_fevals", f"must be at least 1, got {max_fevals}")
    return int(max_fevals)


def _file_stem(cache: KernelCache) -> str:
    stem = "".join(ch if ch.isalnum() else "_" for ch in f"{cache.kernel}_{cache.device}")
    return stem[:80] or "cache"


def _intact(path: Path) -> bool:
    """Whether a copy is still there and closed (Kernel Tuner "opens" a cache it appends to)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(-3, 2)
            return fh.read().rstrip().endswith(b"}")
    except OSError:
        return False


_FILES = _SimulationFiles()


def _problem_size(cache: KernelCache) -> tuple[Any, ...] | None:
    """The cache's problem size as Kernel Tuner wants it (``None`` when it holds none usable)."""
    size = cache.problem_size
    if isinstance(size, bool) or size is None or isinstance(size, str):
        return None
    if isinstance(size, (int, float)):
        return (size,)
    if isinstance(size, (list, tuple)):
        return tuple(size)
    return None


def _kt_key(cache: KernelCache, config: dict[str, Any]) -> str:
    """Kernel Tuner's cache key of ``config``: its values joined by commas in parameter order."""
    return ",".join(str(config[n]) for n in cache.parameter_names)


def _write_simulation_cache(cache: KernelCache, path: Path) -> None:
    """Write ``cache`` as a closed, uncompressed Kernel Tuner cache file that Kernel Tuner accepts.

    Keys and parameter values are the canonical ones (the listed values), a
    failed configuration's ``time`` is one of Kernel Tuner's failure strings,
    and a successful one's a float; only the timings the simulation runner
    reads are kept.
    """
    entries: dict[str, dict[str, Any]] = {}
    for config, time in zip(cache.configs, cache.times):
        raw = cache.entry(config)
        entry: dict[str, Any] = dict(config)
        if time is None:
            failure = raw.get("time")
            entry["time"] = failure if failure in FAILURE_STRINGS else "RuntimeFailedConfig"
        else:
            entry["time"] = float(time)
        for name in _KT_TIMINGS:
            value = raw.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                entry[name] = float(value)
        entries[_kt_key(cache, config)] = entry
    document: dict[str, Any] = {"device_name": cache.device, "kernel_name": cache.kernel}
    size = _problem_size(cache)
    if size is not None:
        document["problem_size"] = list(size)
    document.update(
        {
            "tune_params_keys": list(cache.parameter_names),
            "tune_params": {n: list(cache.values[n]) for n in cache.parameter_names},
            "objective": "time",
            "cache": entries,
        }
    )
    tmp = path.with_suffix(".json.part")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(document, fh)
    tmp.replace(path)


# -- Kernel Tuner ------------------------------------------------------------------------------------
@contextlib.contextmanager
def _seeded_latin_hypercube(seed: int) -> Iterator[None]:
    """While inside, Kernel Tuner's ``bayes_opt`` draws its Latin hypercube from a generator seeded by ``seed``.

    ``bayes_opt`` builds ``scipy.stats.qmc.LatinHypercube(d=...)`` without a
    generator, so SciPy seeds it from fresh entropy whatever the global seeds.
    """
    from kernel_tuner.strategies import bayes_opt

    original = bayes_opt.LatinHypercube
    rng = np.random.default_rng(seed)
    bayes_opt.LatinHypercube = functools.partial(original, rng=rng)
    try:
        yield
    finally:
        bayes_opt.LatinHypercube = original


def _quiet_kernel_tuner() -> contextlib.ExitStack:
    """Silence Kernel Tuner's prints (stdout) and its warnings."""
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def run_kernel_tuner(cache: KernelCache, method: str, max_fevals: int, seed: int, workdir: Path | None = None) -> Trace:
    """Run Kernel Tuner's strategy ``method`` (a key of :data:`KERNEL_TUNER_METHODS`) on ``cache`` in simulation mode.

    Kernel Tuner 1.5's ``tune_kernel`` runs for real, with ``simulation_mode``:
    its valid space is exactly the stored configurations, failed ones included
    (a restriction accepts the stored keys), so a failed configuration costs it
    an evaluation. The run is seeded (``random``, ``numpy.random`` and
    ``bayes_opt``'s Latin-hypercube sampler). ``workdir`` is the folder for the
    uncompressed copy of the cache Kernel Tuner reads (a temporary folder,
    removed at exit, when ``None``).

    Returns the unique configurations Kernel Tuner evaluated, in order, with
    their times (``None`` for a failed one), at most ``max_fevals`` of them; a
    strategy that stops early returns fewer (and it is logged).

    Args:
        cache: the Kernel Tuner cache that answers the evaluations.
        method: the strategy, a key of :data:`KERNEL_TUNER_METHODS`.
        max_fevals: how many evaluations to spend at most.
        seed: the run's seed.
        workdir: the folder for Kernel Tuner's copy of the cache (default ``None``: a temporary one).
    """
    if method not in KERNEL_TUNER_METHODS:
        raise InvalidInputError(
            "method", f"unknown Kernel Tuner method {method!r}; one of {', '.join(KERNEL_TUNER_METHODS)}"
        )
    max_fevals = _budget(max_fevals)
    try:
        import kernel_tuner
        from constraint import FunctionConstraint
    except ImportError as exc:
        raise ImportError("the discrete benchmark compares with Kernel Tuner: pip install 'raytuner[bench]'") from exc

    strategy, options = KERNEL_TUNER_METHODS[method]
    path = _FILES.path(cache, workdir)
    names = list(cache.parameter_names)
    stored = {tuple(c[n] for n in names) for c in cache.configs}

    def stored_in_cache(*values: Any) -> bool:
        return values in stored

    by_key = {_kt_key(cache, c): c for c in cache.configs}
    size = _problem_size(cache)
    random.seed(seed)
    np.random.seed(seed)
    with _quiet_kernel_tuner(), _seeded_latin_hypercube(seed) if strategy == "bayes_opt" else contextlib.nullcontext():
        results, _ = kernel_tuner.tune_kernel(
            kernel_name=cache.kernel,
            kernel_source="",
            problem_size=size if size is not None else (1,),
            arguments=[],
            tune_params={n: list(cache.values[n]) for n in names},
            restrictions=[FunctionConstraint(stored_in_cache)],
            cache=str(path),
            simulation_mode=True,
            strategy=strategy,
            strategy_options={**options, "max_fevals": max_fevals},
            quiet=True,
            verbose=False,
        )

    trace: Trace = []
    seen: set[str] = set()
    for result in results:
        if not result:
            continue
        key = ",".join(str(result[n]) for n in names)
        if key in seen:
            continue
        if key not in by_key:
            raise RuntimeError(f"Kernel Tuner returned {key!r}, which is not a stored configuration of {cache.source}")
        seen.add(key)
        trace.append((dict(by_key[key]), _finite(result.get("time"))))
        if len(trace) == max_fevals:
            break
    _log_short(trace, method, max_fevals, cache)
    return trace


def _finite(raw: Any) -> float | None:
    """``raw`` as a finite float, ``None`` for Kernel Tuner's error values and strings."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(float(raw)):
        return None
    return float(raw)


def _log_short(trace: Trace, method: str, max_fevals: int, cache: KernelCache) -> None:
    if len(trace) < max_fevals:
        log.info(
            "%s stopped after %d unique evaluations of the %d asked for on %s (%d stored configurations)",
            method,
            len(trace),
            max_fevals,
            cache.source,
            len(cache.configs),
        )


# -- Optuna TPE ----------------------------------------------------------------------------------------
def _tell_invalid(study: Any, trial: Any, worst: float | None) -> None:
    """Tell an invalid configuration: the worst time so far as a penalty, or failed before any success."""
    from optuna.trial import TrialState

    if worst is None:
        study.tell(trial, state=TrialState.FAIL)
    else:
        study.tell(trial, worst)


def run_optuna_tpe(cache: KernelCache, max_fevals: int, seed: int, n_startup: int = 20) -> Trace:
    """Optuna's TPE (``TPESampler(seed=seed, n_startup_trials=n_startup)``) on ``cache`` for ``max_fevals`` evaluations.

    One categorical per parameter (its listed values), an ask/tell loop
    minimising the time. TPE knows no restrictions, so an invalid proposal is
    told the worst time seen so far (failed before the first success), the
    usual penalty that teaches it to avoid the region: a proposal outside the
    stored (valid) space costs no evaluation, a failed stored configuration
    costs one. A repeated proposal is told its known value at no cost. After
    :data:`MAX_FREE_PROPOSALS` proposals in a row that cost nothing, a random
    unvisited stored configuration (seeded) is evaluated instead (logged: each at
    DEBUG, how many at INFO).

    Returns the unique evaluations in order (``None`` for a failed
    configuration); fewer than ``max_fevals`` only when the cache holds fewer.

    Args:
        cache: the Kernel Tuner cache that answers the evaluations.
        max_fevals: how many evaluations to spend.
        seed: the sampler's seed.
        n_startup: random proposals before TPE's model (default 20).
    """
    max_fevals = _budget(max_fevals)
    try:
        import optuna
    except ImportError as exc:
        raise ImportError("the discrete benchmark compares with Optuna: pip install 'raytuner[bench]'") from exc
    from optuna.distributions import BaseDistribution, CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = list(cache.parameter_names)
    distributions: dict[str, BaseDistribution] = {n: CategoricalDistribution(list(cache.values[n])) for n in names}
    budget = min(max_fevals, len(cache.configs))
    if budget < max_fevals:
        log.info("%s holds %d configurations: TPE evaluates all of them, not %d", cache.source, budget, max_fevals)

    rng = np.random.default_rng(seed)
    visited: dict[tuple[Any, ...], float | None] = {}
    trace: Trace = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup)
        study = optuna.create_study(direction="minimize", sampler=sampler)
        free = forced = asked = 0
        worst: float | None = None
        while len(trace) < budget:
            if free >= MAX_FREE_PROPOSALS:
                unvisited = [c for c in cache.configs if tuple(c[n] for n in names) not in visited]
                config = dict(unvisited[int(rng.integers(len(unvisited)))])
                log.debug(
                    "TPE proposed %d configurations in a row that cost no evaluation on %s; evaluating a "
                    "random unvisited one instead: %s",
                    free,
                    cache.source,
                    config,
                )
                forced += 1
                time = cache.time(config)
                visited[tuple(config[n] for n in names)] = time
                trace.append((config, time))
                told = time if time is not None else worst
                if time is not None:
                    worst = time if worst is None else max(worst, time)
                study.add_trial(
                    create_trial(
                        params=config,
                        distributions=distributions,
                        state=TrialState.COMPLETE if told is not None else TrialState.FAIL,
                        value=told,
                    )
                )
                free = 0
                continue
            trial = study.ask(distributions)
            asked += 1
            config = {n: trial.params[n] for n in names}
            key = tuple(config[n] for n in names)
            if key in visited:  # known: told again, costs nothing
                free += 1
                time = visited[key]
            elif config not in cache:  # outside the valid space: costs nothing
                free += 1
                _tell_invalid(study, trial, worst)
                continue
            else:  # a new stored configuration: one evaluation
                free = 0
                time = cache.time(config)
                visited[key] = time
                trace.append((config, time))
            if time is None:
                _tell_invalid(study, trial, worst)
            else:
                worst = time if worst is None else max(worst, time)
                study.tell(trial, time)
    if forced:
        log.info(
            "TPE on %s: %d of its %d evaluations were random unvisited configurations, evaluated after %d "
            "proposals in a row that cost nothing (%d proposals in all)",
            cache.source,
            forced,
            len(trace),
            MAX_FREE_PROPOSALS,
            asked,
        )
    return trace
