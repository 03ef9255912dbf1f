"""The TLA pool of GPTuneCrowd (paper 000, section V, Table I): one model builder per algorithm.

Each builder takes the source (:class:`~raytuner.engines.transfer.data.SourceData`),
the target's data so far and a :class:`FitContext`, and returns a
:class:`~raytuner.engines.transfer.surrogates.TargetModel` to search.
Target points asked but not yet told enter the target's model at their
predicted mean (the Kriging believer), so a batch spreads out.

- ``multitask_ps`` — Multitask(PS): an LCM over the sources and the target,
  where each source contributes *pseudo samples*, its GP's mean, at a fixed
  design of ``PSEUDO_DESIGN`` points and at every point the target has
  evaluated.
- ``multitask_ts`` — Multitask(TS): an LCM over all true source samples and
  the target's (unequal counts). The sources' LCM is fitted once and
  extended by the target task; each step refits every hyperparameter from
  that start (one L-BFGS start: the same start for the same log, so a
  resumed run refits identically). Learning only the target's weights on
  top of the fixed source model stalls in the source's basin more often
  (the benchmarks page has the figures).
- ``weighted_sum_equal`` / ``weighted_sum_static`` — equations 1–2 with
  weights 1 or the user's weights (one per source task, then the target).
- ``weighted_sum_dynamic`` — the weights solve the linear regression of
  section V-C, ``y* − y_j ≈ Σ_i w_i [μ_i(x*) − μ_i(x_j)]``. Two changes,
  both explained where they are made: the normalisation is by each model's
  output scale (the paper's division by ``y*`` and ``G_i(x*)`` divides by
  zero or flips signs for outputs that cross zero), the target's own GP
  enters with its *leave-one-out* means (it interpolates its data, so its
  in-sample differences would always fit perfectly and take all the
  weight), and the weights are non-negative least squares (a negative
  weight would turn a source's minimum into a maximum).
- ``stacking`` — Vizier's residual GPs over the sources ordered by sample
  count, then the target.

With no target data yet every algorithm is WeightedSum(equal) over the
sources, as the paper does for the first evaluation.

Example:
    >>> sorted(BUILDERS)   # doctest: +NORMALIZE_WHITESPACE
    ['multitask_ps', 'multitask_ts', 'stacking', 'weighted_sum_dynamic', 'weighted_sum_equal',
     'weighted_sum_static']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import nnls

from raytuner.engines.transfer.data import SourceData, fit_gp
from raytuner.engines.transfer.surrogates import (
    MultitaskModel,
    StackedModel,
    TargetModel,
    WeightedSumModel,
    fantasise,
)
from raytuner.models import LCM, FittedLCM, LCMOptions, TrainingData
from raytuner.models.executors import Executor

__all__ = ["TargetData", "FitContext", "BUILDERS", "PSEUDO_DESIGN", "dynamic_weights"]

#: Points of the fixed design at which Multitask(PS) takes pseudo samples of each source.
PSEUDO_DESIGN = 10


@dataclass
class TargetData:
    """The target's successful evaluations (unit cube, minimisation values) and its pending points."""

    X: np.ndarray
    v: np.ndarray
    pending: np.ndarray

    def __len__(self) -> int:
        return len(self.v)


@dataclass
class FitContext:
    """How a builder fits: LCM options, executor, random stream, the pseudo design, static weights."""

    options: LCMOptions
    executor: Executor | None  # None: each fit's own default (raytuner.models.executors.default_executor)
    rng: np.random.Generator
    design: Callable[[int], np.ndarray]
    weights: np.ndarray | None = None


def _target_gp(target: TargetData, context: FitContext) -> FittedLCM:
    return fit_gp(target.X, target.v, context.options, context.rng, context.executor)


def weighted_sum(
    source: SourceData, target: TargetData, context: FitContext, weights: np.ndarray | None = None
) -> WeightedSumModel:
    """Equations 1–2 with ``weights`` (one per source, then the target; default all 1)."""
    count = len(source)
    w = np.ones(count + 1) if weights is None else np.asarray(weights, dtype=float)
    models = [source.gp(i) for i in range(count)]
    if not len(target):
        reference = np.vstack([t.X for t in source.tasks])
        return WeightedSumModel(models, w[:count], reference)
    models.append(fantasise(_target_gp(target, context), 0, target.pending))
    return WeightedSumModel(models, w, target.X)


def dynamic_weights(source_means: list[np.ndarray], target_loo: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Non-negative weights of the regression ``(y* − y_j)/s = Σ_i w_i [μ_i(x*) − μ_i(x_j)]``.

    ``source_means[i]`` are source model ``i``'s standardised means at the
    target's points, ``target_loo`` the target GP's leave-one-out means
    there, ``v`` the target's minimisation values and ``s`` their standard
    deviation. All-zero weights (nothing explains the target) fall back to
    equal weights.

    Args:
        source_means: Each source model's mean at the target points.
        target_loo: The target model's leave-one-out means.
        v: The target's observed (minimised) values.

    >>> v = np.array([3.0, 1.0, 2.0])
    >>> dynamic_weights([2 * v / v.std(), np.zeros(3)], np.zeros(3), v).round(3).tolist()
    [0.5, 0.0, 0.0]
    """
    best = int(np.argmin(v))
    scale = float(v.std()) if len(v) > 1 and v.std() > 0 else 1.0
    lhs = (v[best] - v) / scale
    columns = [m[best] - m for m in [*source_means, target_loo]]
    weights, _ = nnls(np.column_stack(columns), lhs)
    return weights if np.any(weights > 0) else np.ones(len(columns))


def build_weighted_sum_equal(source: SourceData, target: TargetData, context: FitContext) -> TargetModel:
    """WeightedSum(equal): every weight 1."""
    return weighted_sum(source, target, context)


def build_weighted_sum_static(source: SourceData, target: TargetData, context: FitContext) -> TargetModel:
    """WeightedSum(static): the user's weights."""
    return weighted_sum(source, target, context, context.weights)


def build_weighted_sum_dynamic(source: SourceData, target: TargetData, context: FitContext) -> TargetModel:
    """WeightedSum(dynamic): weights by regression (section V-C) once the target has two samples."""
    if len(target) < 2:
        return weighted_sum(source, target, context)
    gp = _target_gp(target, context)
    means = [source.gp(i).predict_standardised(0, target.X)[0] for i in range(len(source))]
    weights = dynamic_weights(means, gp.leave_one_out()[0], target.v)
    models = [source.gp(i) for i in range(len(source))] + [fantasise(gp, 0, target.pending)]
    return WeightedSumModel(models, weights, target.X)


def build_stacking(source: SourceData, target: TargetData, context: FitContext) -> TargetModel:
    """Stacking: the sources' residual chain, then a GP of the target's residual."""
    if not len(target):
        return weighted_sum(source, target, context)
    chain = source.residual_chain()
    prior = sum((m.predict(0, target.X)[0] for m in chain), np.zeros(len(target)))
    residual = fit_gp(target.X, target.v - prior, context.options, context.rng, context.executor)
    counts = [len(source.tasks[i]) for i in source.stacking_order()] + [len(target)]
    return StackedModel([*chain, fantasise(residual, 0, target.pending)], counts, float(target.v.min()))


def build_multitask_ts(source: SourceData, target: TargetData, context: FitContext) -> TargetModel:
    """Multitask(TS): the sources' LCM extended by the target and refitted, with all true samples."""
    if not len(target):
        return weighted_sum(source, target, context)
    n = len(source)
    start = source.lcm_hyperparameters().with_new_task()
    data = TrainingData([t.X for t in source.tasks] + [target.X], [t.v for t in source.tasks] + [target.v])
    model = LCM(replace(context.options, latent=source.latent, warm_starts=1))
    fitted = model.fit(data, seed=context.rng, executor=context.executor, warm_start=start)
    return MultitaskModel(fantasise(fitted, n, target.pending), n)


def build_multitask_ps(source: SourceData, target: TargetData, context: FitContext) -> TargetModel:
    """Multitask(PS): an LCM over pseudo samples of the sources and the target's true samples."""
    if not len(target):
        return weighted_sum(source, target, context)
    n = len(source)
    X = np.vstack([context.design(PSEUDO_DESIGN), target.X])
    pseudo = [source.gp(i).predict(0, X)[0] for i in range(n)]
    data = TrainingData([X] * n + [target.X], pseudo + [target.v])
    fitted = LCM(replace(context.options, latent=source.latent)).fit(data, seed=context.rng, executor=context.executor)
    return MultitaskModel(fantasise(fitted, n, target.pending), n)


#: Algorithm name -> model builder.
BUILDERS: dict[str, Callable[[SourceData, TargetData, FitContext], TargetModel]] = {
    "multitask_ps": build_multitask_ps,
    "multitask_ts": build_multitask_ts,
    "weighted_sum_equal": build_weighted_sum_equal,
    "weighted_sum_static": build_weighted_sum_static,
    "weighted_sum_dynamic": build_weighted_sum_dynamic,
    "stacking": build_stacking,
}
