"""The Ray Tune peers of the band benchmark (:mod:`benchmarks.band`): BOHB, Hyperband and ASHA.

Each runner makes one ``tune.run`` per task and returns one
:class:`~benchmarks.band_peers.Trace` per task, as the sequential tuners
of :mod:`benchmarks.band_peers` do.

- Demo (Table 1, one-shot fidelity, minimise): ``HB`` (HyperBandScheduler,
  random search) and ``BOHB`` (TuneBOHB + HyperBandForBOHB),
  :func:`run_demo_ray`. :func:`demo_trainable` reports
  ``demo_fidelity(x, t, b)`` without checkpoints, so a trial that Hyperband
  pauses starts again from 0 when resumed and pays ``b / b_max`` again: the
  one-shot accounting.
- LCBench (iterative fidelity, maximise ``val_accuracy``): ``ASHA``, ``HB`` and
  ``BOHB``, :func:`run_lcbench_ray`; :func:`lcbench_trainable` checkpoints
  the epoch, so a promotion pays only the extra epochs.

The trainables report only at the fidelities where the scheduler decides
(:func:`~benchmarks.band_ray_budget.report_points`; the scheduler's
``time_attr`` is the reported ``fidelity``), which leaves its decisions
unchanged and saves Ray's per-report round trip. The runners need
``ray.init`` first; each ``tune.run`` stops when the task's budget is spent
(:class:`~benchmarks.band_ray_budget.ReportBudget`). Ray's trial workers
import this module to run the trainables: it imports no engine and no Ray at
the top, so that they start fast.

Example (what a run is set up with needs no cluster):
    >>> from raytuner.engines import BanditStructure
    >>> run = RayRun("ASHA", BanditStructure.hyperband(1, 8, 2), 15.0, "y", "min", iterative=False)
    >>> run.b_max, run.points()
    (8, (1, 2, 4, 8))

With ``ray.init()`` done, ``run_demo_ray("BOHB", [1.0, 1.2], run.structure, seed=0)``
gives one trace per task (some seconds per task).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.band_peers import Trace, demo_budget
from benchmarks.band_ray_budget import ReportBudget, hyperband_trials, report_points
from benchmarks.data import find
from raytuner.problem.space import ProblemSpace, Space
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_fidelity
from raytuner.test_problems.lcbench import HYPERPARAMETERS, LCBenchSurrogate

if TYPE_CHECKING:  # the engines (SciPy, the LCM) load lazily: Ray's trial workers import this module
    from raytuner.engines import BanditStructure

__all__ = [
    "RAY_KINDS",
    "RayRun",
    "run_demo_ray",
    "run_lcbench_ray",
    "demo_trainable",
    "lcbench_trainable",
    "tune_space",
    "config_space",
    "budget_trace",
]

log = logging.getLogger(__name__)

#: Ray Tune schedulers the benchmark compares with (the searcher is random search but for BOHB).
RAY_KINDS: tuple[str, ...] = ("ASHA", "HB", "BOHB")


def tune_space(space: Space) -> dict[str, Any]:
    """Ray Tune's random-search domains for ``space`` (log scales kept; integer bounds inclusive).

    Args:
        space: the parameter space.

    >>> space = tune_space(ProblemSpace.parse(DEMO_PROBLEM).parameter_space)
    >>> sorted(space), type(space["x"]).__name__, (space["x"].lower, space["x"].upper)
    (['x'], 'Float', (0.0, 1.0))
    """
    from ray import tune

    out: dict[str, Any] = {}
    for p in space:
        if p.type == "categorical":
            out[p.name] = tune.choice(list(p.categories))
        elif p.type == "integer":
            lo, hi = int(p.lower_bound), int(p.upper_bound) + 1  # Ray's upper bound is exclusive
            out[p.name] = tune.lograndint(lo, hi) if p.log else tune.randint(lo, hi)
        else:
            out[p.name] = (tune.loguniform if p.log else tune.uniform)(p.lower_bound, p.upper_bound)
    return out


def config_space(space: Space, seed: int) -> Any:
    """A ConfigSpace ``ConfigurationSpace`` for ``space`` (what TuneBOHB samples), seeded with ``seed``.

    ConfigSpace comes with the ``[bench]`` extra.

    Args:
        space: the parameter space.
        seed: the ConfigSpace sampler's seed.

    Example::

        cs = config_space(ProblemSpace.parse(DEMO_PROBLEM).parameter_space, seed=0)
        list(cs)                 # ['x']
        cs.sample_configuration()["x"]    # a float in [0, 1]
    """
    import ConfigSpace as CS

    cs = CS.ConfigurationSpace(seed=seed)
    for p in space:
        if p.type == "categorical":
            cs.add(CS.CategoricalHyperparameter(p.name, list(p.categories)))
        elif p.type == "integer":
            cs.add(CS.UniformIntegerHyperparameter(p.name, int(p.lower_bound), int(p.upper_bound), log=p.log))
        else:
            cs.add(CS.UniformFloatHyperparameter(p.name, p.lower_bound, p.upper_bound, log=p.log))
    return cs


@contextlib.contextmanager
def _quiet_tune() -> Iterator[None]:
    """No result files, no progress tables, no warnings from Tune's result loading for one run."""
    names = {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1", "RAY_AIR_NEW_OUTPUT": "0"}
    saved = {k: os.environ.get(k) for k in names}
    loggers = [logging.getLogger(n) for n in ("ray.tune", "ray.train", "ray.air")]
    levels = [lg.level for lg in loggers]
    os.environ.update(names)
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)  # pandas, through TuneBOHB's KDEs
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _trial_dirname(trial: Any) -> str:
    return str(trial.trial_id)


@dataclass(frozen=True)
class RayRun:
    """One Ray tuner on one task: the scheduler kind, the structure, the budget and what to optimise.

    >>> from raytuner.engines import BanditStructure
    >>> lcbench = BanditStructure.hyperband(1, 52, 3, integer=True)
    >>> RayRun("HB", lcbench, 12.7, "val_accuracy", "max", iterative=True).points()
    (1, 3, 5, 9, 15, 17, 27, 45, 51, 52)
    """

    kind: str
    structure: BanditStructure
    budget: float  # normalised cost per task
    metric: str
    mode: str  # "min" or "max"
    iterative: bool  # whether a resumed trial continues from a checkpoint

    @property
    def b_max(self) -> int:
        """``max_t``: the highest fidelity."""
        return int(self.structure.b_max)

    def points(self) -> tuple[int, ...]:
        """Where the trainable reports (see :func:`~benchmarks.band_ray_budget.report_points`)."""
        return report_points(self.kind, self.b_max, self.structure.eta, int(self.structure.fidelities[-1]))


def _ray_run(
    run: RayRun, trainable: Callable[..., None], constants: Mapping[str, Any], space: Space, seed: int
) -> tuple[ReportBudget, dict[str, dict[str, Any]]]:
    """One ``tune.run`` until the budget is spent: the budget's report log and each trial's config.

    Hyperband's last rung ends at ``min(r0 η^s, max_t)``, below ``max_t`` when
    ``max_t`` is no power of ``η`` (52 epochs, η = 3: 51, 45, 27); with
    ``stop_last_trials=False`` a bracket's survivors train on to ``max_t``, as
    the paper's last rung does, instead of stopping short of it.
    """
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, HyperBandForBOHB, HyperBandScheduler
    from ray.tune.search import BasicVariantGenerator

    common: dict[str, Any] = {"time_attr": "fidelity", "max_t": run.b_max, "metric": run.metric, "mode": run.mode}
    eta = run.structure.eta
    config: dict[str, Any] = dict(constants)
    concurrency: int | None = 2
    if run.kind == "BOHB":
        from ray.tune.search.bohb import TuneBOHB

        scheduler: Any = HyperBandForBOHB(reduction_factor=eta, stop_last_trials=False, **common)
        search: Any = TuneBOHB(config_space(space, seed), metric=run.metric, mode=run.mode, seed=seed)
    else:
        config.update(tune_space(space))
        search = BasicVariantGenerator(random_state=seed)
        if run.kind == "HB":
            scheduler = HyperBandScheduler(reduction_factor=eta, stop_last_trials=False, **common)
            concurrency = None  # a bracket must hold all its trials at once; the 2 CPUs bound the concurrency
        elif run.kind == "ASHA":
            scheduler = ASHAScheduler(reduction_factor=eta, grace_period=int(run.structure.fidelities[-1]), **common)
        else:
            raise ValueError(f"unknown Ray tuner {run.kind!r}; choose one of {RAY_KINDS}")
    limit = run.budget * run.b_max
    budget = ReportBudget(limit, metric=run.metric)
    samples = int(math.ceil(limit))  # no trial costs less than one fidelity unit
    if run.kind == "HB":  # no concurrency limit: create only the trials the budget can reach
        samples = min(samples, hyperband_trials(run.b_max, eta, limit, iterative=run.iterative))
    with tempfile.TemporaryDirectory(prefix="raytuner_band_") as storage, _quiet_tune():
        analysis = tune.run(
            trainable,
            config=config,
            search_alg=search,
            scheduler=scheduler,
            num_samples=samples,
            stop=budget.stopper(),
            reuse_actors=True,
            max_concurrent_trials=concurrency,
            verbose=0,
            storage_path=storage,
            resources_per_trial={"cpu": 1},
            raise_on_failed_trial=False,
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
            trial_dirname_creator=_trial_dirname,
        )
        configs = {trial.trial_id: dict(trial.config) for trial in analysis.trials}
    return budget, configs


def budget_trace(
    budget: ReportBudget,
    configs: Mapping[str, dict[str, Any]],
    b_max: int,
    sign: float,
    truth: Callable[[dict[str, Any]], float],
) -> Trace:
    """A run's trace from its budget's log; the answer is ``truth`` of the best configuration at the highest
    fidelity reached (with a note when that is below ``b_max``).

    Args:
        budget: the run's budget, whose log holds (trial id, fidelity, value, cost) per report.
        configs: trial id to the trial's configuration.
        b_max: the highest fidelity (a cost is normalised by it).
        sign: ``1.0`` when the value is minimised, ``-1.0`` when maximised.
        truth: the objective at ``b_max`` of a configuration, the answer.

    >>> budget = ReportBudget(8.0, metric="y")
    >>> budget.record("a", {"fidelity": 2, "y": 3.0}), budget.record("a", {"fidelity": 4, "y": 2.0})
    (False, False)
    >>> trace = budget_trace(budget, {"a": {"x": 0.5}}, 4, 1.0, lambda c: c["x"])
    >>> trace.costs, trace.values, trace.final, trace.note
    ([0.5, 0.5], [nan, 2.0], 0.5, '')
    """
    trace = Trace()
    for _, fidelity, value, cost in budget.log:
        trace.add(cost / b_max, value if fidelity >= b_max else None)
    finite = [(f, v, tid) for tid, f, v, _ in budget.log if math.isfinite(v)]
    if not finite:
        trace.note = "no successful report"
        return trace
    top = max(f for f, _, _ in finite)
    _, _, tid = min((sign * v, n, tid) for n, (f, v, tid) in enumerate(finite) if f == top)
    trace.final = truth(configs[tid])
    if top < b_max:
        trace.note = f"no trial reached b_max = {b_max}; answer from the best at fidelity {top:g}"
    return trace


def demo_trainable(config: dict[str, Any], report_at: Sequence[int] = (), b_max: int = 1) -> None:
    """Report ``demo_fidelity(x, t, b)`` at each ``b`` of ``report_at``; no checkpoints (a resume restarts).

    A Ray Tune function trainable; ``config`` holds the task ``t`` and the
    configuration ``x``.

    Args:
        config: the trial's configuration: the task ``t`` and ``x``.
        report_at: the fidelities to report at (default none).
        b_max: the largest fidelity (default 1).

    Example (after ``ray.init()``)::

        trainable = tune.with_parameters(demo_trainable, report_at=(1, 2, 4, 8), b_max=8)
        tune.run(trainable, config={"t": 1.0, "x": tune.uniform(0.0, 1.0)}, num_samples=4)
    """
    from ray import tune

    for b in report_at:
        tune.report({"y": demo_fidelity(config["x"], config["t"], b=b, b_max=b_max), "fidelity": b})


def _demo_truth(t: float, config: Mapping[str, Any]) -> float:
    return demo(config["x"], t)


def run_demo_ray(kind: str, tasks: Sequence[float], structure: BanditStructure, seed: int) -> list[Trace]:
    """Ray Tune's ``kind`` (``"HB"`` or ``"BOHB"``), one ``tune.run`` per task, each stopped at ``C`` per task.

    Args:
        kind: Ray Tune's scheduler: ``"HB"`` or ``"BOHB"``.
        tasks: the task values ``t`` to tune, one ``tune.run`` and one trace each.
        structure: the bandit structure of the row (it sets ``max_t``, ``η`` and the budget).
        seed: the searchers' seed.

    Example (after ``ray.init(num_cpus=2)``; some seconds per task)::

        traces = run_demo_ray("BOHB", [1.0, 1.2], BanditStructure.hyperband(1, 8, 2), seed=0)
        [t.final for t in traces]    # the true y(x, t) of the best configuration at b_max, per task
    """
    from ray import tune

    run = RayRun(kind, structure, demo_budget(structure)[0], "y", "min", iterative=False)
    trainable = tune.with_parameters(demo_trainable, report_at=run.points(), b_max=run.b_max)
    space = ProblemSpace.parse(DEMO_PROBLEM).parameter_space
    traces = []
    for j, t in enumerate(tasks):
        budget, configs = _ray_run(run, trainable, {"t": t}, space, seed * 1000 + j)
        traces.append(budget_trace(budget, configs, run.b_max, 1.0, functools.partial(_demo_truth, t)))
        if traces[-1].note:
            log.warning("%s on t=%.4f: %s", kind, t, traces[-1].note)
    return traces


@functools.lru_cache(maxsize=2)
def _surrogate(data_dir: str | None) -> LCBenchSurrogate:
    return LCBenchSurrogate(data_dir if data_dir is not None else find("yahpo_lcbench"))


def lcbench_trainable(config: dict[str, Any], data_dir: str | None = None, report_at: Sequence[int] = ()) -> None:
    """Train (on the surrogate) up to each epoch of ``report_at``, checkpointing the epoch; a restore continues.

    A Ray Tune function trainable; ``config`` holds ``task_id`` and the 7
    hyperparameters (:data:`~raytuner.test_problems.lcbench.HYPERPARAMETERS`).

    Args:
        config: the trial's configuration: ``task_id`` and the 7 hyperparameters.
        data_dir: the LCBench surrogate's folder (default ``None``: :func:`~raytuner.test_problems.lcbench.default_data_dir`).
        report_at: the epochs to report at (default none).

    Example (after ``ray.init()``)::

        trainable = tune.with_parameters(lcbench_trainable, report_at=(2, 6, 18, 52))
        tune.run(trainable, config={"task_id": 3945, **tune_space(LCBenchSurrogate().problem().parameter_space)},
                 scheduler=ASHAScheduler(time_attr="fidelity", metric="val_accuracy", mode="max", max_t=52))
    """
    from ray import tune
    from ray.tune import Checkpoint

    surrogate = _surrogate(data_dir)
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            start = int(json.loads((Path(folder) / "epoch.json").read_text())["epoch"])
    params = {name: config[name] for name in HYPERPARAMETERS}
    for epoch in (e for e in report_at if e > start):
        value = surrogate.evaluate(config["task_id"], params, epoch)["val_accuracy"]
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "epoch.json").write_text(json.dumps({"epoch": epoch}))
            tune.report({"val_accuracy": value, "fidelity": epoch}, checkpoint=Checkpoint.from_directory(folder))


def run_lcbench_ray(
    kind: str,
    surrogate: LCBenchSurrogate,
    task_ids: Sequence[int],
    structure: BanditStructure,
    budget: float,
    seed: int,
) -> list[Trace]:
    """Ray Tune's ``kind`` (``"ASHA"``, ``"HB"``, ``"BOHB"``) per task, stopped at ``budget`` (epochs / 52).

    Args:
        kind: Ray Tune's scheduler: ``"ASHA"``, ``"HB"`` or ``"BOHB"``.
        surrogate: the LCBench surrogate (its folder is passed to the trainables).
        task_ids: the LCBench task ids to tune, one trace each.
        structure: the bandit structure, in epochs.
        budget: the normalised cost per task to spend.
        seed: the searchers' seed.

    Example (after ``ray.init(num_cpus=2)``; tens of seconds per task)::

        structure = BanditStructure.hyperband(1, 52, 3, integer=True)
        traces = run_lcbench_ray("ASHA", LCBenchSurrogate(), [3945], structure, 12.7, seed=0)
        traces[0].final          # val_accuracy at epoch 52 of the best configuration
    """
    from ray import tune

    run = RayRun(kind, structure, budget, "val_accuracy", "max", iterative=True)
    trainable = tune.with_parameters(lcbench_trainable, data_dir=str(surrogate.data_dir), report_at=run.points())
    space = surrogate.problem(task_ids).parameter_space
    traces = []
    for j, task_id in enumerate(task_ids):
        spent, configs = _ray_run(run, trainable, {"task_id": task_id}, space, seed * 1000 + j)

        def truth(config: dict[str, Any], task_id: int = task_id) -> float:
            params = {name: config[name] for name in HYPERPARAMETERS}
            return surrogate.evaluate(task_id, params, run.b_max)["val_accuracy"]

        traces.append(budget_trace(spent, configs, run.b_max, -1.0, truth))
        if traces[-1].note:
            log.warning("%s on task %s: %s", kind, task_id, traces[-1].note)
    return traces
