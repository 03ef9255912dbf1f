"""The overhead half of the MLA benchmark: what one ``ask`` costs, and our LCM fit against GPy's.

For each history size, a (``tasks``, ``samples_per_task``) pair (tasks
t = linspace(1, 5.5, tasks), ``samples_per_task`` evaluations of each drawn
by LHS; ``records`` = their product), it measures:

- **ask**: an :class:`~raytuner.engines.MLA` engine replays the history,
  answers one cold ``ask`` (``first_ask_seconds``), then ``asks`` more
  ask/tell rounds, each ask timed (its model refit warm-starts from the last
  one); ``ask_seconds_median`` is their median.
- **our fit**: ``LCM(LCMOptions(latent=3, **GPTUNE_LCM)).fit(TrainingData(X, y), seed=0)``
  (GPTune's model, which GPy fits too: :data:`~raytuner.models.GPTUNE_LCM`; the asks use the
  engine's defaults) on the history standardised per task: each fit is cold (no warm start), and
  ``fit_seconds_median`` is the median of their seconds; its
  ``log_likelihood`` (``loglik``) and its report's ``approximation``.
- **naive fit**: GPy's ``GPCoregionalizedRegression`` with a 3-latent-RBF LCM
  of rank 1 on the same standardised data, ``optimize_restarts`` timed, and
  its ``log_likelihood()``; only at the ``naive_samples`` sizes of at most
  :data:`NAIVE_MAX_SAMPLES` samples per task (beyond, it is too slow).
- **held-out error at scale** (:mod:`benchmarks.mla_scale`): from
  1,000 records, our fit's and the exact model's error on fresh points.

Both fits see the same values: the data are standardised per task here, and
standardising again (as our fit does) changes nothing; each row says whether
that held (``standardisation_agrees``).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.mla_scale import SCALE_KEYS, dash, render_scale, scale_figures, task_values
from benchmarks.report import markdown_table
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import demo

__all__ = [
    "OverheadSettings",
    "History",
    "make_history",
    "standardise",
    "time_asks",
    "fit_ours",
    "fit_naive",
    "run_overhead",
    "measure_size",
    "overhead_row",
    "overhead_goals",
    "render_overhead",
]

log = logging.getLogger(__name__)

_DATA_SEED = 20240611
GOAL_ASK_SECONDS = 1.0  # median ask at 10 tasks x 30 samples
GOAL_SPEEDUP = 3.0  # our fit against GPy's
LOGLIK_TOLERANCE = 0.1  # nats: "equal" log-likelihood
NAIVE_MAX_SAMPLES = 50  # GPy's fit runs at most at this many samples per task


@dataclass(frozen=True)
class OverheadSettings:
    """What the overhead measurement runs: history sizes, timed asks and the naive fit's effort.

    ``sizes`` are (tasks, samples per task) pairs; a row of ``n`` tasks has
    the tasks t = linspace(1, 5.5, n) (:func:`~benchmarks.mla_scale.task_values`).
    """

    sizes: tuple[tuple[int, int], ...]
    asks: int
    n_initial: int
    fit_repeats: int
    naive_restarts: int
    naive_samples: tuple[int, ...]  # history sizes the (slow) naive fit runs at


@dataclass
class History:
    """Evaluated configurations and their demo values, per task."""

    tasks: list[dict[str, float]]
    configs: list[list[dict[str, Any]]]
    y: list[np.ndarray]

    def records(self) -> list[FunctionEvaluation]:
        """The history as records, tasks interleaved as an engine would have produced them."""
        out = []
        for k in range(max(len(c) for c in self.configs)):
            for task, configs, ys in zip(self.tasks, self.configs, self.y):
                if k < len(configs):
                    out.append(
                        FunctionEvaluation.create(
                            task, configs[k], {"y": float(ys[k])}, provenance=Provenance(engine="lhs")
                        )
                    )
        return out


def make_history(
    tasks: Sequence[float], samples_per_task: int, seed: int = _DATA_SEED, problem: ProblemSpace | None = None
) -> History:
    """An independent LHS of ``samples_per_task`` points of x per task, with the demo's values.

    Args:
        tasks: the task values ``t``.
        samples_per_task: how many points per task.
        seed: the sampler's seed (default 20240611).
        problem: the tuning problem (default ``None``: the demo's).
    """
    problem = problem or _demo_problem()
    task_dicts = [{"t": float(t)} for t in tasks]
    streams = np.random.SeedSequence([seed, samples_per_task]).spawn(len(task_dicts))
    configs = [
        sample_configurations(problem, task, samples_per_task, seed=np.random.default_rng(stream))
        for task, stream in zip(task_dicts, streams)
    ]
    ys = [np.array([demo(c["x"], task["t"]) for c in cs]) for task, cs in zip(task_dicts, configs)]
    return History(task_dicts, configs, ys)


def standardise(ys: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each task's values minus their mean, over their (population) standard deviation.

    Args:
        ys: each task's values.

    >>> [v.tolist() for v in standardise([np.array([1.0, 3.0]), np.array([5.0, 5.0])])]
    [[-1.0, 1.0], [0.0, 0.0]]
    """
    out = []
    for y in ys:
        y = np.asarray(y, dtype=float)
        std = float(np.std(y))
        out.append((y - np.mean(y)) / (std if std > 0 else 1.0))
    return out


def time_asks(
    history: History, asks: int, n_initial: int, problem: ProblemSpace | None = None, seed: int = 0
) -> tuple[float, list[float]]:
    """Seconds of the cold first ``ask`` after replaying ``history``, and of ``asks`` warm ask/tell rounds.

    Args:
        history: the per-task samples the engine replays first.
        asks: how many warm ask/tell rounds to time.
        n_initial: the engine's random evaluations before its model.
        problem: the tuning problem (default ``None``: the demo's).
        seed: the engine's seed (default 0).
    """
    from raytuner.engines import MLA

    problem = problem or _demo_problem()
    engine = MLA(problem, history.tasks, seed=seed, n_initial=n_initial)
    engine.replay(history.records())
    seconds: list[float] = []
    first = 0.0
    for round_ in range(asks + 1):
        t0 = time.perf_counter()
        suggestion = engine.ask()
        elapsed = time.perf_counter() - t0
        if round_ == 0:
            first = elapsed
        else:
            seconds.append(elapsed)
        y = demo(suggestion.config["x"], suggestion.task["t"])
        engine.tell(
            FunctionEvaluation.create(suggestion.task, suggestion.config, {"y": y}, provenance=suggestion.provenance)
        )
    return first, seconds


def fit_ours(history: History, repeats: int, problem: ProblemSpace | None = None) -> dict[str, Any]:
    """Our LCM (3 latent functions) on the per-task standardised history: seconds, log-likelihood, agreement.

    Each of the ``repeats`` fits is cold. The figures also hold the last fitted model (``model``) and
    the standardised values it saw (``y_standardised``), for :func:`~benchmarks.mla_scale.scale_figures`.

    Args:
        history: the per-task samples to fit.
        repeats: how many timed fits.
        problem: the tuning problem (default ``None``: the demo's).
    """
    from raytuner.models import GPTUNE_LCM, LCM, LCMOptions, TrainingData

    problem = problem or _demo_problem()
    X = [problem.parameter_space.encode(configs) for configs in history.configs]
    y = standardise(history.y)
    seconds, fitted = [], None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        fitted = LCM(LCMOptions(latent=3, **GPTUNE_LCM)).fit(TrainingData(X=X, y=y), seed=0)
        seconds.append(time.perf_counter() - t0)
    assert fitted is not None
    # the model's own standardisation must leave already standardised data alone: then its
    # predictions in original units equal those in its standardised space
    agrees = all(
        np.allclose(fitted.predict(j, X[j])[0], fitted.predict_standardised(j, X[j])[0], rtol=1e-6, atol=1e-6)
        for j in range(len(X))
    )
    if not agrees:
        log.warning(
            "our LCM re-standardised already standardised data: its log-likelihood is not on the same values as GPy's"
        )
    return {
        "seconds": seconds,
        "loglik": float(fitted.log_likelihood),
        "standardisation_agrees": agrees,
        "model": fitted,
        "X": X,
        "y_standardised": y,
    }


def fit_naive(history: History, restarts: int, problem: ProblemSpace | None = None) -> dict[str, Any]:
    """GPy's coregionalised regression (LCM, 3 RBF latents, W rank 1) on the standardised history.

    Args:
        history: the per-task samples to fit.
        restarts: GPy's optimiser restarts.
        problem: the tuning problem (default ``None``: the demo's).
    """
    import GPy

    problem = problem or _demo_problem()
    X = [problem.parameter_space.encode(configs) for configs in history.configs]
    Y = [y.reshape(-1, 1) for y in standardise(history.y)]
    np.random.seed(0)  # GPy draws the coregionalisation's initial W, and its restarts, from numpy's global stream
    kernel = GPy.util.multioutput.LCM(
        input_dim=X[0].shape[1],
        num_outputs=len(X),
        kernels_list=[GPy.kern.RBF(X[0].shape[1], ARD=True) for _ in range(3)],
        W_rank=1,
    )
    model = GPy.models.GPCoregionalizedRegression(X, Y, kernel=kernel)
    t0 = time.perf_counter()
    model.optimize_restarts(num_restarts=restarts, verbose=False, robust=True)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "loglik": float(model.log_likelihood())}


def run_overhead(settings: OverheadSettings) -> list[dict[str, Any]]:
    """One row per history size: ask, our fit, the naive fit (where it runs) and the held-out figures.

    Args:
        settings: the history sizes, asks, repeats and restarts to run.
    """
    return [measure_size(tasks, samples, settings) for tasks, samples in settings.sizes]


def measure_size(
    tasks: int, samples: int, settings: OverheadSettings, problem: ProblemSpace | None = None
) -> dict[str, Any]:
    """The overhead row of ``tasks`` demo tasks x ``samples`` samples per task.

    Args:
        tasks: how many tasks (t = linspace(1, 5.5, tasks)).
        samples: how many LHS samples per task.
        settings: the asks, repeats and restarts to run (its ``sizes`` are not read).
        problem: the tuning problem (default ``None``: the demo's).
    """
    problem = problem or _demo_problem()
    t_values = task_values(tasks)
    history = make_history(t_values, samples, problem=problem)
    first, asks = time_asks(history, settings.asks, settings.n_initial, problem)
    ours = fit_ours(history, settings.fit_repeats, problem)
    run_naive = samples in settings.naive_samples and samples <= NAIVE_MAX_SAMPLES
    naive = fit_naive(history, settings.naive_restarts, problem) if run_naive else None
    scale = scale_figures(ours["model"], ours["X"], history.y, ours["y_standardised"], t_values, problem)
    row = overhead_row(tasks, samples, first, asks, ours, naive, settings.naive_restarts, scale)
    log.info(
        "overhead %d tasks x %d samples: ask median %.3f s (cold %.3f s), our cold fit %.3f s (loglik %.2f), "
        "naive fit %s s (loglik %s)",
        tasks,
        samples,
        row["ask_seconds_median"],
        row["first_ask_seconds"],
        row["fit_seconds_median"],
        row["loglik"],
        row["naive_fit_seconds_median"],
        row["naive_loglik"],
    )
    return row


def overhead_row(
    tasks: int,
    samples: int,
    first_ask: float,
    asks: Sequence[float],
    ours: dict[str, Any],
    naive: dict[str, Any] | None,
    naive_restarts: int,
    scale: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One row of ``results["overhead"]["rows"]`` from the measured figures (``naive`` may be missing).

    ``fit_seconds_median`` is our cold fit's median seconds; ``records`` is tasks x samples.

    Args:
        tasks: how many tasks the history has.
        samples: how many samples per task.
        first_ask: seconds of the cold first ask.
        asks: seconds of each warm ask/tell round.
        ours: our fit's figures, as :func:`fit_ours` returns them.
        naive: the naive fit's figures (:func:`fit_naive`), or ``None`` where it did not run.
        naive_restarts: the naive fit's optimiser restarts.
        scale: the held-out and exact-model figures (:func:`~benchmarks.mla_scale.scale_figures`;
            default ``None``: all ``None``).

    >>> row = overhead_row(10, 30, 2.0, [0.5, 0.7, 0.6], {"seconds": [1.0], "loglik": -10.0,
    ...                    "standardisation_agrees": True}, {"seconds": 6.0, "loglik": -10.5}, 5)
    >>> row["ask_seconds_median"], row["fit_speedup_vs_naive"], row["ask_speedup_vs_naive"]
    (0.6, 6.0, 10.0)
    >>> row["records"], row["heldout_rmse"], row["approximation"]
    (300, None, None)
    """
    ask_median = statistics.median(asks) if asks else first_ask
    fit_median = statistics.median(ours["seconds"])
    naive_s = None if naive is None else naive["seconds"]
    return {
        "tasks": tasks,
        "samples_per_task": samples,
        "records": tasks * samples,
        "ask_seconds_median": round(ask_median, 4),
        "first_ask_seconds": round(first_ask, 4),
        "asks_timed": len(asks),
        "fit_seconds_median": round(fit_median, 4),
        "naive_fit_seconds_median": None if naive_s is None else round(naive_s, 4),
        "naive_restarts": None if naive is None else naive_restarts,
        "loglik": round(ours["loglik"], 4),
        "naive_loglik": None if naive is None else round(naive["loglik"], 4),
        "fit_speedup_vs_naive": None if naive_s is None else round(naive_s / fit_median, 2),
        "ask_speedup_vs_naive": None if naive_s is None else round(naive_s / ask_median, 2),
        "standardisation_agrees": ours["standardisation_agrees"],
        **dict.fromkeys(SCALE_KEYS),
        **(scale or {}),
    }


def overhead_goals(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool | None]:
    """The overhead goals, met or not; ``None`` where the run measured nothing to judge by.

    Args:
        rows: the overhead rows, as :func:`overhead_row` returns them.

    >>> overhead_goals([{"tasks": 10, "samples_per_task": 30, "ask_seconds_median": 0.4,
    ...                  "naive_fit_seconds_median": 9.0, "fit_speedup_vs_naive": 4.5, "loglik": -3.0,
    ...                  "naive_loglik": -3.05}])
    {'ask_median_le_1s_at_10x30': True, 'fit_3x_faster_than_naive_at_equal_loglik': True}
    """
    at_30 = [r for r in rows if r["tasks"] == 10 and r["samples_per_task"] == 30]
    judged = [r for r in rows if r.get("naive_fit_seconds_median") is not None]
    return {
        "ask_median_le_1s_at_10x30": at_30[0]["ask_seconds_median"] <= GOAL_ASK_SECONDS if at_30 else None,
        "fit_3x_faster_than_naive_at_equal_loglik": all(
            r["fit_speedup_vs_naive"] >= GOAL_SPEEDUP and r["loglik"] >= r["naive_loglik"] - LOGLIK_TOLERANCE
            for r in judged
        )
        if judged
        else None,
    }


def render_overhead(overhead: Mapping[str, Any]) -> list[str]:
    """The report's overhead section, as lines.

    Args:
        overhead: ``results["overhead"]``: its rows and settings.
    """
    o, cell = overhead, dash
    table = markdown_table(
        [
            "tasks x samples",
            "records",
            "warm ask median s",
            "first ask s",
            "our cold fit s",
            "GPy fit s",
            "fit speed-up",
            "ask speed-up",
            "our loglik",
            "GPy loglik",
        ],
        [
            [
                f"{r['tasks']} x {r['samples_per_task']}",
                r.get("records", r["tasks"] * r["samples_per_task"]),
                r["ask_seconds_median"],
                r["first_ask_seconds"],
                r["fit_seconds_median"],
                cell(r["naive_fit_seconds_median"]),
                cell(r["fit_speedup_vs_naive"]),
                cell(r["ask_speedup_vs_naive"]),
                r["loglik"],
                cell(r["naive_loglik"]),
            ]
            for r in o["rows"]
        ],
    )
    lines = [
        "## Overhead",
        "",
        "Demo tasks t = linspace(1, 5.5, tasks), LHS histories. Ask: median of "
        f"{o['asks']} warm ask/tell rounds after a cold first ask. Fits on the per-task standardised "
        "history: ours `LCM(LCMOptions(latent=3))` with GPTune's RBF kernel and no priors, cold (median "
        f"of {o['fit_repeats']}), GPy "
        f"`GPCoregionalizedRegression` with a 3-RBF LCM, W rank 1, `optimize_restarts({o['naive_restarts']})`"
        f" once, at {o.get('naive_samples')} samples per task only (at most {NAIVE_MAX_SAMPLES}: beyond, "
        "too slow). Speed-ups are GPy's fit time over ours.",
        "",
        table,
        "",
    ]
    if not all(r.get("standardisation_agrees", True) for r in o["rows"]):
        lines += ["Warning: our fit re-standardised the standardised data; the log-likelihoods may not compare.", ""]
    return lines + render_scale(o["rows"])


def _demo_problem() -> ProblemSpace:
    from raytuner.test_problems import DEMO_PROBLEM

    return ProblemSpace.parse(DEMO_PROBLEM)
