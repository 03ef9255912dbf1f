"""Transfer learning to new tasks: TLA1 and TLA2 (paper 003, section 5).

**TLA1** predicts the optimum of an unseen task without evaluating it: the
best configuration of every tuned task is taken, and one GP per tuning
parameter models that parameter's optimal value over the task space
(equations 16–17). The prediction comes with its standard deviation.

**TLA2** tunes a new task quickly: its initial sample is drawn from a normal
distribution centred on the TLA1 prediction, with a standard deviation per
dimension taken from the LCM's length scales (the paper's suggested
improvement: the basin of an optimum is about a length scale wide), and its
model is the source LCM extended by the new task, in which only the new
task's coregionalization weights (its row of each ``W_q``, its ``κ_q`` and
its noise) are learned — or, with ``refit="all"``, everything (TLA2 with
restarting, section 5.3).

Example:
    >>> import numpy as np
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> records = [FunctionEvaluation.create({"t": t}, {"x": x}, {"y": (x - 0.1 * t) ** 2})
    ...            for t in (1.0, 2.0, 3.0, 4.0) for x in np.linspace(0, 1, 11)]
    >>> prediction = TLA1(problem, records, seed=0).predict({"t": 2.5})
    >>> bool(abs(prediction.config["x"] - 0.25) < 0.06)
    True
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from raytuner.engines.base import fitting_records, other_tasks, source_records
from raytuner.engines.mla import MLA
from raytuner.errors import InvalidInputError
from raytuner.models import GPTUNE_LCM, LCM, FittedLCM, Hyperparameters, LCMOptions, TrainingData
from raytuner.models.executors import Executor, InlineExecutor
from raytuner.problem.records import EvaluationSource, FunctionEvaluation, task_key
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace

__all__ = ["TLA1", "TLA2", "OptimumPrediction", "best_per_task", "centred_sample", "TLA1_OPTIONS"]

log = logging.getLogger(__name__)

#: TLA1's GPs of the optima over the task parameters: GPTune's model (RBF, maximum likelihood), two starts.
#: It extrapolates a trend in the optima past the tuned tasks; the priors of :class:`LCMOptions`' defaults,
#: measured on tuning parameters, pull a few tasks' length scales short, and the prediction back to the mean.
#: Its outputs (the optima) are centred, and its categorical task columns compared by category.
TLA1_OPTIONS = LCMOptions(n_starts=2, **{**GPTUNE_LCM, "centre": True, "categorical": None})


@dataclass
class OptimumPrediction:
    """TLA1's predicted optimum of a task: the configuration and its per-parameter uncertainty.

    ``unit_mean``/``unit_std`` are on the unit cube of the parameter space;
    ``std`` gives the standard deviation of real and integer parameters in
    their own units (a categorical parameter's spread has no unit: ``None``).
    """

    task: dict[str, Any]
    config: dict[str, Any]
    unit_mean: np.ndarray
    unit_std: np.ndarray
    std: dict[str, float | None]


def best_per_task(
    problem: ProblemSpace, records: Sequence[FunctionEvaluation], objective: str | None = None
) -> dict[tuple[tuple[str, Any], ...], FunctionEvaluation]:
    """The best successful evaluation of every task in ``records`` (by the objective's goal).

    Args:
        problem: The problem (its objective decides "best").
        records: The evaluations; failed ones and non-finite values are skipped.
        objective: The objective's name (default: the first).
    """
    target = problem.objective(objective)
    best: dict[tuple[tuple[str, Any], ...], tuple[float, FunctionEvaluation]] = {}
    for record in records:
        value = record.value(target.name)
        if value is None or not np.isfinite(value):
            continue
        key = task_key(record.task_parameter)
        score = target.sign() * value
        if key not in best or score < best[key][0]:
            best[key] = (score, record)
    return {k: v[1] for k, v in best.items()}


class TLA1:
    """One GP per tuning parameter over the task space, fitted to the tuned tasks' optima.

    Args:
        problem: The problem; it must have a task space.
        records: The tuned tasks' evaluations; those that do not fit the problem
            (task or configuration outside it) are skipped with one warning that counts them.
        objective: The objective's name (default: the first).
        lcm: Configure the GPs (default :data:`TLA1_OPTIONS`).
        seed: Seeds the fits.
        executor: Runs the multi-start fits (default: inline).
    """

    def __init__(
        self,
        problem: ProblemSpace,
        records: Sequence[FunctionEvaluation],
        *,
        objective: str | None = None,
        lcm: LCMOptions | None = None,
        seed: int | None = None,
        executor: Executor | None = None,
    ) -> None:
        if not problem.input_space.dimension:
            raise InvalidInputError("input_space", "TLA1 needs a task space to model the optima over")
        records = fitting_records(problem, records, "TLA1 source")
        optima = list(best_per_task(problem, records, objective).values())
        if len(optima) < 2:
            raise InvalidInputError("records", f"TLA1 needs the optima of at least two tuned tasks, got {len(optima)}")
        self.problem = problem
        self.optima = optima
        T = problem.input_space.encode([r.task_parameter for r in optima])
        U = problem.parameter_space.encode([r.tuning_parameter for r in optima])
        model = LCM((lcm or TLA1_OPTIONS).over(problem.input_space))
        self._models: list[FittedLCM] = [
            model.fit(TrainingData([T], [U[:, j]]), seed=seed, executor=executor or InlineExecutor())
            for j in range(U.shape[1])
        ]

    def predict(self, task: Mapping[str, Any]) -> OptimumPrediction:
        """The predicted optimal configuration of ``task`` with its uncertainty (no evaluation).

        Args:
            task: The task, checked against the input space.
        """
        t = self.problem.input_space.check(task, "task")
        T = self.problem.input_space.encode([t])
        moments = [m.predict(0, T) for m in self._models]
        mean = np.clip(np.array([float(m[0][0]) for m in moments]), 0.0, 1.0)
        std = np.sqrt(np.array([float(m[1][0]) for m in moments]))
        config = self.problem.parameter_space.decode(mean[None, :])[0]
        spread: dict[str, float | None] = {}
        for j, parameter in enumerate(self.problem.parameter_space):
            if parameter.type == "categorical":
                spread[parameter.name] = None
            else:
                ends = parameter.from_unit(np.clip(np.array([mean[j] - std[j], mean[j] + std[j]]), 0, 1))
                spread[parameter.name] = float(abs(ends[1] - ends[0]) / 2)
        return OptimumPrediction(dict(t), config, mean, std, spread)


def centred_sample(
    problem: ProblemSpace,
    task: Mapping[str, Any],
    centre: np.ndarray,
    std: np.ndarray,
    n: int,
    rng: np.random.Generator,
    max_rounds: int = 200,
) -> list[dict[str, Any]]:
    """``n`` distinct valid configurations drawn from N(centre, diag(std²)) on the unit cube.

    Draws outside the cube or breaking a constraint are discarded and
    replaced (paper 003, section 5.2.1); if too few are found, the rest
    comes from a Latin hypercube.

    Args:
        problem: The problem (its parameter space and constraints).
        task: The task the configurations must be valid for.
        centre: The mean, on the unit cube.
        std: The standard deviation per dimension, on the unit cube.
        n: How many configurations.
        rng: The random stream.
        max_rounds: How many rounds of ``4 n`` draws to try before the Latin hypercube.
    """
    space = problem.parameter_space
    chosen: list[dict[str, Any]] = []
    keys: set[tuple[tuple[str, Any], ...]] = set()
    for _ in range(max_rounds):
        U = rng.normal(centre, std, size=(4 * n, len(centre)))
        U = U[np.all((U >= 0) & (U <= 1), axis=1)]
        for config in space.decode(U):
            key = task_key(config)
            if key not in keys and problem.is_valid(task, config):
                keys.add(key)
                chosen.append(config)
                if len(chosen) == n:
                    return chosen
    log.warning("centred sampling found %d of %d points; the rest by LHS", len(chosen), n)
    return chosen + sample_configurations(problem, task, n - len(chosen), seed=rng, exclude=chosen)


class TLA2(MLA):
    """Tune ``target_task`` starting from tuned source tasks; see the module docstring.

    Args:
        problem: The problem's spaces.
        target_task: The task to tune.
        source: The source tasks' evaluations, or an :class:`EvaluationSource`
            (those that do not fit the problem are skipped with one warning).
        seed: Seeds every random stream and model fit.
        n_initial: The samples drawn around TLA1's prediction before the model guides.
        source_model: The source tasks' LCM hyperparameters (fitted here when not given).
        refit: ``"weights"`` learns only the new task's weights; ``"all"`` refits every hyperparameter.
        **mla_options: :class:`~raytuner.engines.MLA`'s other options (``lcm``,
            ``executor``, ...); ``design`` changes nothing: the new task's sample is centred on TLA1's
            prediction and the source tasks need none.
    """

    name = "tla2"
    #: TLA2 grows the source tasks' model by one task: GPTune's signed task weights.
    default_options = LCMOptions(task_weights="signed")

    def __init__(
        self,
        problem: ProblemSpace,
        target_task: Mapping[str, Any],
        source: Sequence[FunctionEvaluation] | EvaluationSource,
        seed: int | None = None,
        *,
        n_initial: int = 5,
        source_model: Hyperparameters | None = None,
        refit: Literal["weights", "all"] = "weights",
        **mla_options: Any,
    ) -> None:
        if refit not in ("weights", "all"):
            raise InvalidInputError("refit", f"unknown refit mode {refit!r}", allowed=["weights", "all"])
        target_task = problem.input_space.check(target_task, "target_task")
        source = source_records(problem, source, "TLA2 source")
        source_tasks = other_tasks(source, [])
        if task_key(target_task) in {task_key(t) for t in source_tasks}:
            raise InvalidInputError("target_task", f"{dict(target_task)} is already one of the source tasks")
        super().__init__(problem, [*source_tasks, dict(target_task)], seed, n_initial=n_initial, **mla_options)
        self.refit = refit
        self.source = source
        self._keep_options(source_model=source_model, refit=refit)
        self.new_index = len(self.tasks) - 1
        self.targets = [self.new_index]
        self.tla1 = TLA1(problem, source, objective=self.objective.name, seed=seed)
        for record in source:
            self._fold(record)  # checked above
        self._source_uids.update(r.uid for r in source)
        self._source_model = source_model or self._fit_source()
        self._extended: Hyperparameters | None = None

    def _fit_source(self) -> Hyperparameters:
        data, _ = TrainingData.from_records(self.problem, self.tasks[:-1], self._records, self.objective.name)
        return self.model.fit(data, seed=self._stream(1), executor=self.executor).hyperparameters

    def initial_design(self, index: int) -> list[dict[str, Any]]:
        """Centred sampling around the TLA1 prediction for the new task.

        Args:
            index: The task's position in :attr:`tasks`.
        """
        if index != self.new_index:
            return super().initial_design(index)
        prediction = self.tla1.predict(self.tasks[index])
        lengths = self._source_model.lengthscales  # (Q, d)
        weights = self._source_model.coregionalization()[:, np.arange(self.new_index), np.arange(self.new_index)]
        relevance = weights.sum(axis=1) / max(float(weights.sum()), 1e-12)  # share of each latent function
        width = np.exp(relevance @ np.log(lengths))  # weighted geometric mean per dimension
        std = np.clip(width, 0.02, 0.5)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed or 0, 7919, index]))
        return centred_sample(self.problem, self.tasks[index], prediction.unit_mean, std, self.n_initial, rng)

    def extended_hyperparameters(self) -> Hyperparameters:
        """The source LCM with one more task whose weights start at the source tasks' mean."""
        return self._source_model.with_new_task()

    def fit(self, data: TrainingData) -> FittedLCM:
        """The extended model: only the new task's weights learned, or everything with ``refit="all"``.

        Args:
            data: The successful evaluations, encoded.
        """
        start = self._warm if self._warm is not None else self.extended_hyperparameters()
        if self.refit == "all":
            return self.model.fit(data, seed=self._stream(104729), executor=self.executor, warm_start=start)
        return self.model.fit(
            data,
            seed=self._stream(104729),
            executor=self.executor,
            warm_start=start,
            fixed=start.fixed_except_task(self.new_index),
        )
