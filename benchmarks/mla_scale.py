"""The large-history half of the MLA benchmark's overhead: held-out error, the exact model, the scale goals.

For an overhead row of at least :data:`HELDOUT_MIN_RECORDS` records (10 x 100
and 20 x 250 in the full run) the overhead's fit (``LCM(LCMOptions(latent=3,
**GPTUNE_LCM))``, :data:`~raytuner.models.GPTUNE_LCM`: GPTune's model with the default size limits, which may fit
its hyperparameters on a subset and condition a sparse FITC
posterior past its limits) is scored on a fresh held-out set:
:data:`HELDOUT_PER_TASK` uniform points of x per task, the demo's values,
a seed of their own. Its figures:

- ``heldout_rmse``: the root mean squared error of the posterior mean, pooled
  over tasks, in output units;
- ``heldout_log_density``: the mean Gaussian log predictive density of each
  held-out value, output units (the demo is noiseless: no noise is added to
  the latent variance, which is floored at :data:`VARIANCE_FLOOR`);
- ``approximation``: the fit report's approximation (``None`` for an exact
  fit on all the data).

Where the exact model (``LCMOptions(latent=3, fit_limit=None,
exact_limit=None, **GPTUNE_LCM)``) is feasible, at most :data:`EXACT_MAX_RECORDS` records,
the same figures are given for it (``exact_heldout_rmse``,
``exact_heldout_log_density``) with its training log-likelihood
(``exact_loglik``, on the same standardised data as the row's ``loglik``) and
its fit's seconds (``exact_fit_seconds``); beyond, these are ``None``.

The models are fitted on the per-task standardised history (as the overhead's
fits are); their predictions are mapped back to output units with each task's
training mean and standard deviation.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchmarks.report import markdown_table
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM, demo

__all__ = [
    "task_values",
    "make_heldout",
    "heldout_scores",
    "score_fit",
    "fit_exact",
    "scale_figures",
    "scale_goals",
    "render_scale",
    "dash",
]

log = logging.getLogger(__name__)

HELDOUT_MIN_RECORDS = 1000  # rows with at least this many records get the held-out figures
EXACT_MAX_RECORDS = 1000  # the exact model runs at most at this many records
HELDOUT_PER_TASK = 20
VARIANCE_FLOOR = 1e-12
_HELDOUT_SEED = 20261119
GOAL_WARM_ASK_SECONDS = 0.3  # median warm ask at 10 x 30
GOAL_COLD_FIT_SECONDS = 5.0  # cold fit at 10 x 30
#: (tasks, samples per task) -> the most seconds a median ask may take there
GOAL_ASK_AT_SCALE: dict[tuple[int, int], float] = {(10, 100): 1.0, (20, 250): 3.0}
SCALE_KEYS = (
    "heldout_rmse",
    "heldout_log_density",
    "approximation",
    "exact_heldout_rmse",
    "exact_heldout_log_density",
    "exact_loglik",
    "exact_fit_seconds",
)


def task_values(tasks: int) -> tuple[float, ...]:
    """The demo's task values for a row of ``tasks`` tasks: t = linspace(1, 5.5, tasks).

    Args:
        tasks: how many tasks.

    >>> task_values(10)[:3], task_values(20)[-1]
    ((1.0, 1.5, 2.0), 5.5)
    """
    return tuple(float(t) for t in np.linspace(1.0, 5.5, tasks))


def make_heldout(
    tasks: Sequence[float],
    per_task: int = HELDOUT_PER_TASK,
    seed: int = _HELDOUT_SEED,
    problem: ProblemSpace | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per task, ``per_task`` uniform points (encoded, unit cube) and their demo values.

    Args:
        tasks: the task values ``t``.
        per_task: how many points per task (default 20).
        seed: the points' seed (default 20261119, apart from the training histories').
        problem: the tuning problem (default ``None``: the demo's).

    >>> X, y = make_heldout((1.0, 5.5), per_task=4)
    >>> [x.shape for x in X], bool(np.all((X[0] >= 0) & (X[0] <= 1))), len(y[1])
    ([(4, 1), (4, 1)], True, 4)
    """
    problem = problem or ProblemSpace.parse(DEMO_PROBLEM)
    space = problem.parameter_space
    streams = np.random.SeedSequence([seed, per_task]).spawn(len(tasks))
    X, y = [], []
    for t, stream in zip(tasks, streams):
        configs = space.decode(np.random.default_rng(stream).uniform(size=(per_task, space.dimension)))
        X.append(space.encode(configs))
        y.append(np.array([demo(c["x"], float(t)) for c in configs]))
    return X, y


def heldout_scores(
    means: Sequence[np.ndarray], variances: Sequence[np.ndarray], observed: Sequence[np.ndarray]
) -> dict[str, float]:
    """Pooled RMSE and mean Gaussian log predictive density of ``observed`` (variances floored at 1e-12).

    Args:
        means: per task, the predictive means.
        variances: per task, the predictive variances.
        observed: per task, the held-out values.

    >>> s = heldout_scores([np.array([0.0, 1.0])], [np.array([1.0, 1.0])], [np.array([0.0, 3.0])])
    >>> round(s["rmse"], 4), round(s["log_density"], 4)
    (1.4142, -1.9189)
    """
    m, y = np.concatenate(list(means)), np.concatenate(list(observed))
    v = np.maximum(np.concatenate(list(variances)), VARIANCE_FLOOR)
    log_density = -0.5 * (np.log(2 * math.pi * v) + (y - m) ** 2 / v)
    return {"rmse": float(np.sqrt(np.mean((y - m) ** 2))), "log_density": float(np.mean(log_density))}


def score_fit(
    fitted: Any, train_y: Sequence[np.ndarray], heldout: tuple[list[np.ndarray], list[np.ndarray]]
) -> dict[str, float]:
    """:func:`heldout_scores` of a model fitted on the per-task standardised ``train_y``, in output units.

    Args:
        fitted: the :class:`~raytuner.models.FittedLCM`, fitted on the standardised values.
        train_y: per task, the training values before standardising (their mean and standard
            deviation map the model's predictions back to output units).
        heldout: per task, the held-out points and values (:func:`make_heldout`).
    """
    means, variances = [], []
    for j, (X, y) in enumerate(zip(heldout[0], train_y)):
        centre, scale = float(np.mean(y)), float(np.std(y)) or 1.0
        mean, variance = fitted.predict(j, X)
        means.append(centre + scale * np.asarray(mean, dtype=float))
        variances.append(scale**2 * np.asarray(variance, dtype=float))
    return heldout_scores(means, variances, heldout[1])


def fit_exact(X: Sequence[np.ndarray], y_standardised: Sequence[np.ndarray]) -> tuple[Any, float]:
    """The exact model (no subset, no sparse posterior) on the standardised data, and its fit's seconds.

    Args:
        X: per task, the encoded training points.
        y_standardised: per task, the standardised training values.
    """
    from raytuner.models import GPTUNE_LCM, LCM, LCMOptions, TrainingData

    options = LCMOptions(latent=3, fit_limit=None, exact_limit=None, **GPTUNE_LCM)
    t0 = time.perf_counter()
    fitted = LCM(options).fit(TrainingData(X=list(X), y=list(y_standardised)), seed=0)
    return fitted, time.perf_counter() - t0


def scale_figures(
    fitted: Any,
    X: Sequence[np.ndarray],
    y: Sequence[np.ndarray],
    y_standardised: Sequence[np.ndarray],
    tasks: Sequence[float],
    problem: ProblemSpace | None = None,
) -> dict[str, Any]:
    """A row's :data:`SCALE_KEYS`: held-out figures of ``fitted`` and, where feasible, of the exact model.

    Rows under :data:`HELDOUT_MIN_RECORDS` records get ``None`` everywhere but ``approximation``.

    Args:
        fitted: the overhead's fit on ``y_standardised``.
        X: per task, the encoded training points.
        y: per task, the training values.
        y_standardised: per task, the standardised training values the fits see.
        tasks: the task values ``t``.
        problem: the tuning problem (default ``None``: the demo's).
    """
    report = getattr(fitted, "report", None)
    approximation = getattr(report, "approximation", None)
    out: dict[str, Any] = dict.fromkeys(SCALE_KEYS)
    out["approximation"] = _plain(approximation)
    records = sum(len(v) for v in y)
    if records < HELDOUT_MIN_RECORDS:
        return out
    heldout = make_heldout(tasks, problem=problem)
    ours = score_fit(fitted, y, heldout)
    out.update(heldout_rmse=round(ours["rmse"], 6), heldout_log_density=round(ours["log_density"], 4))
    if records <= EXACT_MAX_RECORDS:
        exact, seconds = fit_exact(X, y_standardised)
        scores = score_fit(exact, y, heldout)
        out.update(
            exact_heldout_rmse=round(scores["rmse"], 6),
            exact_heldout_log_density=round(scores["log_density"], 4),
            exact_loglik=round(float(exact.log_likelihood), 4),
            exact_fit_seconds=round(seconds, 4),
        )
    log.info(
        "held-out at %d records: ours rmse %s, log density %s (%s); exact rmse %s, log density %s",
        records,
        out["heldout_rmse"],
        out["heldout_log_density"],
        (approximation or {}).get("method", "exact") if isinstance(approximation, Mapping) else "exact",
        out["exact_heldout_rmse"],
        out["exact_heldout_log_density"],
    )
    return out


def scale_goals(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool | None]:
    """The latency goals of issue 19, met or not; ``None`` where the run has no such row.

    Args:
        rows: the overhead rows (``tasks``, ``samples_per_task``, ``ask_seconds_median``,
            ``fit_seconds_median``: the cold fit).

    >>> scale_goals([{"tasks": 10, "samples_per_task": 30, "ask_seconds_median": 0.2, "fit_seconds_median": 6}])
    ... # doctest: +NORMALIZE_WHITESPACE
    {'warm_ask_median_le_0.3s_at_10x30': True, 'cold_fit_le_5s_at_10x30': False,
     'ask_median_le_1s_at_10x100': None, 'ask_median_le_3s_at_20x250': None}
    """
    by_size = {(r["tasks"], r["samples_per_task"]): r for r in rows}

    def at_most(size: tuple[int, int], key: str, limit: float) -> bool | None:
        value = by_size.get(size, {}).get(key)
        return None if value is None else value <= limit

    out = {
        "warm_ask_median_le_0.3s_at_10x30": at_most((10, 30), "ask_seconds_median", GOAL_WARM_ASK_SECONDS),
        "cold_fit_le_5s_at_10x30": at_most((10, 30), "fit_seconds_median", GOAL_COLD_FIT_SECONDS),
    }
    for size, limit in GOAL_ASK_AT_SCALE.items():
        out[f"ask_median_le_{limit:g}s_at_{size[0]}x{size[1]}"] = at_most(size, "ask_seconds_median", limit)
    return out


def render_scale(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's held-out section (rows of at least 1,000 records), as lines; none without such rows.

    Args:
        rows: the overhead rows.
    """
    big = [r for r in rows if r.get("records", 0) >= HELDOUT_MIN_RECORDS]
    if not big:
        return []
    cell = dash
    table = markdown_table(
        [
            "tasks x samples",
            "records",
            "our model",
            "held-out RMSE",
            "held-out log density",
            "exact RMSE",
            "exact log density",
            "our loglik",
            "exact loglik",
            "exact fit s",
        ],
        [
            [
                f"{r['tasks']} x {r['samples_per_task']}",
                r["records"],
                _describe(r.get("approximation")),
                cell(r.get("heldout_rmse")),
                cell(r.get("heldout_log_density")),
                cell(r.get("exact_heldout_rmse")),
                cell(r.get("exact_heldout_log_density")),
                r.get("loglik"),
                cell(r.get("exact_loglik")),
                cell(r.get("exact_fit_seconds")),
            ]
            for r in big
        ],
    )
    return [
        "### Held-out error at scale",
        "",
        f"Per task {HELDOUT_PER_TASK} fresh uniform points of the demo (a seed of their own). RMSE pooled "
        "over tasks and mean Gaussian log predictive density of the held-out values, both in output units "
        f"(latent variance, floored at {VARIANCE_FLOOR:g}; the demo has no noise). Our model is "
        "`LCMOptions(latent=3)` with GPTune's RBF kernel and no priors; exact is the same with "
        "`fit_limit=None, exact_limit=None`, run at "
        f"most at {EXACT_MAX_RECORDS:,} records (beyond, too slow: '-'). Log-likelihoods are on the "
        "standardised training data.",
        "",
        table,
        "",
    ]


def dash(value: Any) -> str:
    """A report cell: ``"-"`` for ``None``, else ``str(value)``.

    Args:
        value: the cell's value.

    >>> dash(None), dash(0.5)
    ('-', '0.5')
    """
    return "-" if value is None else str(value)


def _describe(approximation: Any) -> str:
    if not isinstance(approximation, Mapping):
        return "exact"
    parts = [str(approximation.get("method", "approximate"))]
    if approximation.get("fit_samples") is not None:
        parts.append(f"fit on {approximation.get('fit_samples')} of {approximation.get('samples', '?')}")
    if approximation.get("inducing") is not None:
        parts.append(f"{approximation.get('inducing')} inducing")
    return ", ".join(parts)


def _plain(value: Any) -> Any:
    """``value`` as JSON data: mappings and sequences walked, numpy scalars made Python ones."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
