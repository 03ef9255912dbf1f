"""Multitask BO for several objectives and output constraints: one LCM per output, a random scalarisation per ask.

When a problem optimises several outputs, or bounds one (an output
constraint such as memory below the node's), :func:`mla_engine` builds a
:class:`MultiObjectiveMLA`. It keeps one multitask model (the LCM of
:class:`~raytuner.engines.MLA`, with its task correlations learnt per
output) for each optimised or bounded output, all fitted to the same
evaluations, and chooses each suggestion by:

- **Pareto improvement**: with two objectives, a candidate's score is its
  expected hypervolume improvement over the task's feasible front (the
  reference point 10 % of each objective's range beyond the worst feasible
  evaluation), estimated from common Monte Carlo draws of the per-output
  posteriors; with more, each ask draws weights ``λ`` from the simplex and
  scores the expected improvement of the augmented Chebyshev scalarisation
  ``max_k λ_k f̃_k + 0.05 Σ_k λ_k f̃_k`` (objectives normalised to the range
  the task has seen; ParEGO's scalarisation with a model per output), so
  successive asks spread along the front. Where no draw improves, the
  predicted scalarisation still orders the candidates. The search for the
  best score also perturbs the task's feasible front
  (``optimize_acquisition(around=...)``), where an improvement is likeliest.
- **Constraints**: the score is multiplied by the posterior probability that
  each bounded output meets its bounds; the improvement is measured from the
  best feasible evaluation. A candidate below
  :data:`~raytuner.engines.pareto_score.CONFIDENT` ranks after every
  likelier one, by its chance alone. Where the likely successes at one value
  of a discrete parameter (every task's) broke a constraint far more often
  than that chance allows, that value's candidates have their chance scaled
  down by the shortfall (:class:`~raytuner.engines.breaches.BreachValues`).
- **Length scales**: without ``lcm`` options, each LCM has the RBF kernel, a
  normal prior on its log length scales (:data:`LENGTHSCALE_PRIOR`) against
  spiky fits and no noise prior (not :class:`~raytuner.models.LCMOptions`'
  defaults, which were chosen for one output).
- **Skewed outputs**: an output whose values so far are positive and whose
  logarithm is clearly less skewed (a run time, a memory footprint) is
  modelled in log space; the draws are taken there and mapped back.

The initial design (a plain LHS: no start from the sources, whose consensus is
one objective's), batch fantasies, replay and stored models are MLA's.
A problem with one objective and no output constraint gets a plain
:class:`~raytuner.engines.MLA`, so its behaviour is unchanged.

Example:
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.problem.space import ProblemSpace
    >>> problem = ProblemSpace.parse({
    ...     "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
    ...     "output_space": [{"name": "f1"}, {"name": "f2"}]})
    >>> engine = mla_engine(problem, [{}], seed=0, n_initial=4, executor=InlineExecutor())
    >>> type(engine).__name__
    'MultiObjectiveMLA'
    >>> for _ in range(6):
    ...     s = engine.ask()
    ...     _ = engine.tell(s, {"f1": s.config["x"] ** 2, "f2": (s.config["x"] - 1) ** 2})
    >>> len(engine.pareto_front({})) >= 2
    True
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from scipy.stats import skew

from raytuner.engines.base import Engine
from raytuner.engines.breaches import NOTE, BreachValues, discrete_columns
from raytuner.engines.mla import MLA
from raytuner.engines.pareto_score import CONFIDENT, DRAWS, ParetoScore, chance_within
from raytuner.models import LCMOptions
from raytuner.models.acquisition import optimize_acquisition
from raytuner.problem.pareto import feasible, pareto_front
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord
from raytuner.problem.space import ProblemSpace

__all__ = [
    "MultiObjectiveMLA",
    "OutputModel",
    "mla_engine",
    "is_multiobjective",
    "tunes_multiobjective",
    "LENGTHSCALE_PRIOR",
]

#: ``(mean, sd)`` of the normal prior on each log length scale of a multi-objective MLA's LCMs, unless its
#: options say otherwise: a median length scale of the unit cube's side, within [0.14, 7] at 95 %.
#: Maximum likelihood on a few dozen samples of 12 parameters (PyAMG) kept some length scales near 0 and pruned
#: others at 100, and the memory model was then sure where it was wrong: many suggestions broke the memory
#: bound; with the prior, fewer did (``python -m benchmarks multiobjective``).
LENGTHSCALE_PRIOR = (0.0, 1.0)

log = logging.getLogger(__name__)

#: How much less skewed an output's logarithm must be than its values for the model to take the logarithm.
SKEW_MARGIN = 0.5


def is_multiobjective(problem: ProblemSpace) -> bool:
    """Whether ``problem`` optimises several outputs or bounds one (it then needs :class:`MultiObjectiveMLA`).

    Args:
        problem: the problem.
    """
    return problem.multiobjective


def tunes_multiobjective(problem: ProblemSpace, objective: str | None) -> bool:
    """Whether an engine given ``objective`` tunes every objective and output constraint of ``problem``.

    Naming one objective tunes it alone, as before several objectives were supported.

    Args:
        problem: the problem.
        objective: the objective an engine was given (``None``: none named).
    """
    return objective is None and is_multiobjective(problem)


def mla_engine(
    problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]], seed: int | None = None, **options: Any
) -> Engine:
    """MLA for ``problem``: :class:`MultiObjectiveMLA` when it has several objectives or an output constraint.

    Naming an ``objective`` in the options tunes that output alone with a plain
    :class:`~raytuner.engines.MLA` (the other outputs are recorded), as before
    several objectives were supported.

    Args:
        problem: the problem.
        tasks: the tasks to tune.
        seed: the engine's seed.
        **options: MLA's options.
    """
    engine = MultiObjectiveMLA if tunes_multiobjective(problem, options.get("objective")) else MLA
    return engine(problem, tasks, seed, **options)


class OutputModel(MLA):
    """One output's LCM inside a composite engine, its ``host``: it models the host's evaluations as the host says.

    It is never asked or told: the host's targets and its told, evaluated and
    pending lists are its own (:meth:`MLA.follow`), and it fits up to the host's
    :meth:`fit_horizon`, scores the host's :meth:`scored_task`, stores its models
    under the host's :meth:`sampler` and warm-starts where the host's
    :meth:`warm_rows` says, so a host that refits once per round
    (GPTuneBand's sampler) refits every output's model at its rounds.

    Args:
        host: The engine whose evaluations it models.
        objective: The output it models.
        **options: MLA's options (no ``source``: the host reads it).

    Example:
        >>> from raytuner.problem.space import ProblemSpace
        >>> from raytuner.test_problems import DEMO_PROBLEM
        >>> host = MLA(ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}], seed=0, n_initial=2)
        >>> model = OutputModel(host, "y", n_initial=2)
        >>> _ = host.tell(host.ask(), {"y": 0.5})
        >>> len(model.evaluated[0]), model.fit_horizon()
        (1, 1)
    """

    def __init__(self, host: MLA, objective: str, **options: Any) -> None:
        super().__init__(host.problem, host.tasks, host.seed, objective=objective, **options)
        self.host = host
        self.follow(host)

    def model_logarithm(self, logged: bool) -> None:
        """Model the output's logarithm (``True``) or its values from the next fit on.

        Args:
            logged: Whether to take the logarithm.
        """
        if logged != self.model.options.log_transform:
            self.model.options = replace(self.model.options, log_transform=logged)

    def fit_horizon(self) -> int:
        """The host's (:meth:`MLA.fit_horizon`)."""
        return self.host.fit_horizon()

    def scored_task(self, index: int) -> int:
        """The host's (:meth:`MLA.scored_task`).

        Args:
            index: The task a configuration is sought for.
        """
        return self.host.scored_task(index)

    def sampler(self) -> dict[str, int | bool] | None:
        """The host's (:meth:`~raytuner.engines.stored_models.StoredModels.sampler`)."""
        return self.host.sampler()

    def levels(self) -> dict[str, Any] | None:
        """The host's (:meth:`MLA.levels`)."""
        return self.host.levels()

    def warm_rows(self, record: SurrogateModelRecord, sampler: Mapping[str, Any] | None) -> list[int] | None:
        """The host's (:meth:`~raytuner.engines.stored_models.StoredModels.warm_rows`).

        Args:
            record: Another sampler's model.
            sampler: Its sampler.
        """
        return self.host.warm_rows(record, sampler)


class MultiObjectiveMLA(MLA):
    """MLA with one LCM per optimised or bounded output; see the module docstring.

    Args:
        problem: The problem (several optimised outputs, or output constraints).
        tasks: The tasks to tune.
        seed: Seeds every random stream and model fit.
        **options: MLA's options (no ``objective``: every optimised output is one). Without ``lcm``,
            the LCMs have the RBF kernel, a length-scale prior (:data:`LENGTHSCALE_PRIOR`) and no noise
            prior (:attr:`default_options`); a given ``lcm`` is used as it is, with signed task
            weights where they leave them to the engine.
    """

    #: The measured settings of these LCMs, with GPTune's signed task weights (nonnegative ones not measured).
    default_options = LCMOptions(
        kernel="rbf", lengthscale_prior=LENGTHSCALE_PRIOR, noise_prior=None, task_weights="signed"
    )

    def __init__(
        self, problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]], seed: int | None = None, **options: Any
    ) -> None:
        # resolved here, so that the components (plain MLAs) fit the same weights
        default = MultiObjectiveMLA.default_options  # named by class: a subclass's default is another model's
        options["lcm"] = (options.get("lcm") or default).weighted(default.task_weights)
        super().__init__(problem, tasks, seed, **options)
        modelled = problem.modelled
        shared = {k: v for k, v in options.items() if k not in ("objective", "source")}
        # over this engine's tasks (source tasks included), with its data, evaluated configurations and
        # fantasies: the components only model, and the source is read once, by this engine
        self.components = [OutputModel(self, output.name, **shared) for output in modelled]
        self._lead = next(k for k, o in enumerate(modelled) if o.optimize)  # the first objective's model
        self._keep_options(objective=None)  # rebuilt by its spec as what it is: every output tuned

    def take_models(self) -> list[SurrogateModelRecord]:
        """The surrogate models fitted since the last call, one per modelled output and fit."""
        models = super().take_models()
        for component in self.components:
            models += component.take_models()
        return models

    def restore_models(self, models: Sequence[SurrogateModelRecord], fixed: bool = False) -> None:
        """Warm-start each output's model from its last stored one.

        Args:
            models: The stored surrogate-model records, oldest first.
            fixed: Use the stored hyperparameters as they are (GPTune's ``load_surrogate_model``).
        """
        for component in self.components:
            component.restore_models(models, fixed)

    def start_sources(self, index: int) -> list[FunctionEvaluation]:
        """None: the sources' consensus is one objective's, so the initial design stays a plain LHS.

        Args:
            index: The task's position.
        """
        return []

    def pareto_front(self, task: Mapping[str, Any]) -> list[FunctionEvaluation]:
        """The feasible evaluations of ``task`` no other one dominates.

        Args:
            task: The task.
        """
        return pareto_front(self.problem, self._records, task)

    def _weights(self, index: int) -> np.ndarray:
        count = len(self.evaluated[index]) + len(self.pending[index])
        rng = np.random.default_rng(np.random.SeedSequence([self.seed or 0, 48271, index, count]))
        return rng.dirichlet(np.ones(len(self.problem.optimised)))

    def _choose_transforms(self) -> None:
        """Model an output's logarithm where its values so far are positive and the log makes them less skewed.

        A run time or a memory footprint spans orders of magnitude with a long
        right tail, which a GP on the raw values fits badly (one outlier sets
        the scale); the choice depends only on the data up to the fit horizon,
        so a replay makes it again.
        """
        if self.model.options.log_transform:  # the user chose the log for every output
            return
        horizon = self.fit_horizon()
        for component in self.components:
            name = component.objective.name
            values = np.array(
                [r.value(name) for r in self._records[:horizon] if r.status == "ok" and r.value(name) is not None],
                dtype=float,
            )
            logged = bool(
                len(values) >= 3
                and values.min() > 0
                and np.ptp(values) > 0  # equal values have no skew (scipy would warn of lost precision)
                and abs(skew(np.log(values))) < abs(skew(values)) - SKEW_MARGIN
            )
            component.model_logarithm(logged)

    def _breaches(self, bounded: Sequence[int]) -> BreachValues:
        """The discrete values at which this engine's likely successes (every task's) broke a constraint too often.

        Each was marked (:data:`~raytuner.engines.breaches.NOTE`) when its chance of meeting every
        constraint, for the task it was scored for, was at least
        :data:`~raytuner.engines.pareto_score.CONFIDENT`; only marks of this kind of engine count (a
        resumed session may replay another engine's records), and with GPTuneBand's levels model only the
        samples at ``b_max``, whose own prediction scored them.
        """
        names = [self.components[k].objective.name for k in bounded]
        own = {self.scored_task(i) for i in self.targets}
        told = [
            r
            for r in self._records
            if r.status == "ok"
            and r.raytuner is not None
            and r.raytuner.engine == self.name
            and (r.raytuner.model_extra or {}).get(NOTE) is True
            and self.task_index(r.task_parameter) in own
            and all(r.value(name) is not None for name in names)
        ]
        space = self.problem.parameter_space
        values = space.encode([r.tuning_parameter for r in told]) if told else np.zeros((0, space.dimension))
        broke = [not self.problem.meets_output_constraints(r.evaluation_result) for r in told]
        return BreachValues(
            values[:, discrete_columns(space)], np.array(broke, dtype=bool), np.full(len(told), CONFIDENT)
        )

    def propose(self, index: int) -> tuple[dict[str, Any], str]:
        exclude = self.evaluated[index] + self.pending[index]
        rng = self._stream(index)
        try:
            self._choose_transforms()
            fits = [c.fitted_model() for c in self.components]
        except Exception:  # a numerical failure must not end a tuning run
            log.exception("model fit failed; suggesting a random configuration for task %d", index)
            fits = [None]
        fitted = [f for f in fits if f is not None]
        if len(fitted) < len(fits):  # too little data for some output: the first objective's search
            return self.components[self._lead].propose(index)
        models = [c.with_fantasies(f) for c, f in zip(self.components, fitted)]
        outputs = [c.objective for c in self.components]
        objectives = [k for k, o in enumerate(outputs) if o.optimize]
        bounded = [k for k, o in enumerate(outputs) if o.bounded]
        target = self.scored_task(index)  # GPTuneBand's levels model: the front at b_max
        mine = [
            r
            for r in self._records
            if self.task_index(r.task_parameter) == target
            and r.status == "ok"
            and all(r.value(outputs[k].name) is not None for k in objectives)
        ]
        if not mine:
            return self.components[self._lead].propose(index)
        seen = np.array([[outputs[k].sign() * r.known_value(outputs[k].name) for k in objectives] for r in mine])
        good = np.array([s for s, r in zip(seen, mine) if feasible(self.problem, r)]).reshape(-1, len(objectives))
        limits = np.array([outputs[k].minimised_bounds() for k in objectives])
        pareto = ParetoScore(seen, good, self._weights(index), limits)
        draws = np.random.default_rng(np.random.SeedSequence([self.seed or 0, 69621, index])).standard_normal(
            (DRAWS, len(objectives))
        )
        columns = discrete_columns(self.problem.parameter_space)
        breaches = self._breaches(bounded) if bounded else None

        def score(U: np.ndarray) -> np.ndarray:
            # each output once, in model units; draws are taken there and mapped back (log-normal where logged)
            predicted = [models[k].predict_standardised(target, U) for k in range(len(models))]
            spread = [np.sqrt(np.maximum(v, 0.0)) for _, v in predicted]
            value = [models[k].transform.inverse for k in range(len(models))]
            mean = np.stack([outputs[k].sign() * value[k](target, predicted[k][0]) for k in objectives], axis=-1)
            samples = np.stack(
                [
                    outputs[k].sign()
                    * value[k](target, predicted[k][0][:, None] + spread[k][:, None] * draws[None, :, j])
                    for j, k in enumerate(objectives)
                ],
                axis=-1,
            )  # (n, draws, m)
            chance = np.ones(len(U))
            for k in bounded:
                o, to_model = outputs[k], models[k].transform.bound
                chance = chance * chance_within(
                    predicted[k][0], spread[k], to_model(target, o.lower_bound), to_model(target, o.upper_bound)
                )
            if breaches is not None:
                chance = chance * breaches.factor(U[:, columns])
            return pareto(mean, samples, chance)

        on_front = {r.uid for r in pareto_front(self.problem, mine)}
        front = [r.tuning_parameter for r in mine if r.uid in on_front]  # in the order they were told
        config, best = optimize_acquisition(
            self.problem,
            self.tasks[index],
            score,
            rng=rng,
            exclude=exclude,
            around=front,
            search_candidates=self.search_candidates,
        )
        if bounded and ParetoScore.likely_success(best):
            self._notes = {NOTE: True}
        return config, "model"
