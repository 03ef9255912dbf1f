"""DiscreteBO: Bayesian optimisation over the valid configurations of a GPU kernel (Willemsen et al., 2021).

The search space is the finite set of valid configurations (listed values
that meet the restrictions), normalised (:class:`CandidateSet`). Every
suggestion scores every unvisited valid configuration with a Matérn GP of
fixed length scale (:class:`CandidateGP`), so no continuous optimum is ever
snapped to a grid. Invalid configurations, the ones that fail to compile,
launch or verify, are failed evaluations: never suggested again and left
out of the objective's surrogate (no penalty value, no mean). A second GP
of the same kernel on validity labels (1 succeeded, 0 failed) learns where
evaluations fail; with ``avoid_failures`` (the default) a model round leaves
out the candidates it predicts below 0.5 while others remain: where failures
cluster where the objective's trend points, a search without it spends
much of its budget on them (``docs/benchmarks.md`` has the figures). The
initial sample is a maximin Latin hypercube design; design points that the restrictions rule
out, and initial points that fail, are replaced by random valid ones until
``n_initial`` initial evaluations succeeded. Then the acquisition functions
(EI, PI, LCB) run alone or as the paper's *multi* or *advanced multi*
portfolio, with the contextual-variance exploration factor.

Defaults are the paper's Table I: Matérn 3/2 with length scale 1.5 when the
exploration factor is the contextual variance (2.0 with a constant factor),
functions in the order (EI, PI, LCB), skip threshold 5, discount factor 0.65
(multi) or 0.75 (advanced multi), required improvement factor 0.1, maximin
LHS initial sampling and pruning of one-valued parameters.

State is rebuilt from the log: a record's provenance says whether it came
from the initial design and which functions in which round proposed it, so a
resumed engine continues the portfolio where it stopped.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> problem = ProblemSpace.parse({
    ...     "parameter_space": [{"name": "bx", "type": "categorical", "categories": [16, 32, 64, 128, 256]},
    ...                         {"name": "tile", "type": "categorical", "categories": [1, 2, 4, 8]}],
    ...     "output_space": [{"name": "time"}],
    ...     "constraints": {"threads": "bx * tile <= 512"}})
    >>> engine = DiscreteBO(problem, seed=0, n_initial=4)
    >>> for _ in range(8):
    ...     s = engine.ask()
    ...     t = abs(s.config["bx"] - 64) / 16 + abs(s.config["tile"] - 2)
    ...     record = engine.tell(s, {"time": t})
    >>> s.provenance.proposer, s.config["bx"] * s.config["tile"] <= 512
    ('model', True)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from raytuner.engines.base import Engine, Suggestion
from raytuner.engines.discrete.candidates import CandidateSet
from raytuner.engines.discrete.gp import KERNELS
from raytuner.engines.discrete.multiobjective import MultiObjectiveSearch, multiobjective_value
from raytuner.engines.discrete.portfolio import AFS, AdvancedMulti, Multi, Portfolio, Single
from raytuner.engines.discrete.search import TaskSearch
from raytuner.engines.multiobjective import tunes_multiobjective
from raytuner.errors import InvalidInputError
from raytuner.problem.pareto import pareto_front
from raytuner.problem.records import FunctionEvaluation, Provenance, task_key
from raytuner.problem.space import ProblemSpace

__all__ = ["DiscreteBO", "METHODS"]

log = logging.getLogger(__name__)

Method = Literal["advanced_multi", "multi", "ei", "pi", "lcb"]
#: The acquisition methods: the two portfolios, then the single functions.
METHODS: tuple[str, ...] = ("advanced_multi", "multi", "ei", "pi", "lcb")
_DISCOUNT = {"multi": 0.65, "advanced_multi": 0.75}


class DiscreteBO(Engine):
    """Bayesian optimisation over an enumerated set of valid discrete configurations.

    Suggestions carry ``proposer`` (``"initial"``, ``"random"`` or
    ``"model"``) and, for model picks, ``acquisitions`` and ``round`` in
    their provenance.

    Args:
        problem: Its tuning parameters must have listed values (categorical,
            or integers); its constraints are the kernel's restrictions.
        tasks: Each is tuned on its own; default: the one empty task of a
            problem without task parameters.
        seed: Seeds the initial design and every random pick.
        method: One of :data:`METHODS` (default ``"ei"``, the lowest mean
            deviation factor of the three in ``python -m benchmarks discrete``).
        n_initial: How many initial evaluations must succeed before the model proposes.
        kernel: ``"matern32"`` or ``"matern52"``.
        lengthscale: The GP's fixed length scale (default: Table I's, by ``exploration``).
        exploration: ``"cv"`` (contextual variance) or a constant.
        acquisitions: The order of a portfolio's functions.
        skip_threshold: A portfolio's skip threshold.
        discount_factor: A portfolio's discount factor (default by ``method``).
        improvement_factor: Advanced multi's required improvement factor.
        candidates: The valid configurations, explicitly (for example those a
            Kernel Tuner cache stores), instead of enumerating the restrictions.
        objective: The objective to tune (default: the first).
        avoid_failures: ``False`` turns the validity model off (the paper's behaviour).
    """

    name = "discrete"

    def __init__(
        self,
        problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
        *,
        method: Method = "ei",
        n_initial: int = 20,
        kernel: str = "matern32",
        lengthscale: float | None = None,
        exploration: Literal["cv"] | float = "cv",
        acquisitions: Sequence[str] = AFS,
        skip_threshold: int = 5,
        discount_factor: float | None = None,
        improvement_factor: float = 0.1,
        candidates: Sequence[Mapping[str, Any]] | None = None,
        objective: str | None = None,
        avoid_failures: bool = True,
    ) -> None:
        if tasks is None:
            if problem.input_space.dimension:
                raise InvalidInputError("tasks", "the problem has task parameters: list the tasks to tune")
            tasks = [{}]
        super().__init__(problem, tasks, seed=seed)
        if method not in METHODS:
            raise InvalidInputError("method", f"unknown method {method!r}", allowed=list(METHODS))
        if kernel not in KERNELS:
            raise InvalidInputError("kernel", f"unknown kernel {kernel!r}", allowed=list(KERNELS))
        if not (exploration == "cv" or (isinstance(exploration, (int, float)) and exploration >= 0)):
            raise InvalidInputError(
                "exploration", f"must be 'cv' or a number >= 0, got {exploration!r}", allowed=["cv", "a number >= 0"]
            )
        if lengthscale is not None and not (isinstance(lengthscale, (int, float)) and lengthscale > 0):
            raise InvalidInputError("lengthscale", f"must be a positive number, got {lengthscale!r}")
        if not isinstance(n_initial, int) or n_initial < 2:
            raise InvalidInputError("n_initial", f"must be an integer >= 2, got {n_initial!r}")
        if not isinstance(skip_threshold, int) or skip_threshold < 1:
            raise InvalidInputError("skip_threshold", f"must be an integer >= 1, got {skip_threshold!r}")
        factor = _DISCOUNT.get(method, 0.75) if discount_factor is None else discount_factor
        if not 0 < factor <= 1:
            raise InvalidInputError("discount_factor", f"must lie in (0, 1], got {factor!r}")
        if not 0 <= improvement_factor < 1:
            raise InvalidInputError("improvement_factor", f"must lie in [0, 1), got {improvement_factor!r}")
        self.method = method
        self.n_initial = n_initial
        self.kernel = kernel
        self.exploration = exploration
        self.lengthscale = float(lengthscale if lengthscale is not None else (1.5 if exploration == "cv" else 2.0))
        self.acquisitions = tuple(acquisitions)
        self.skip_threshold = skip_threshold
        self.discount_factor = float(factor)
        self.improvement_factor = float(improvement_factor)
        self.avoid_failures = bool(avoid_failures)
        Portfolio(self.acquisitions)  # validates the acquisitions, whatever the method
        self.objective = problem.objective(objective)
        #: Several objectives or output constraints (none named): one GP per output, a Pareto score.
        self.multiobjective = tunes_multiobjective(problem, objective)
        self.modelled = problem.modelled if self.multiobjective else []
        self._explicit = None if candidates is None else CandidateSet.from_configs(problem, candidates)
        self._searches: dict[tuple[tuple[str, Any], ...], TaskSearch] = {}
        self._records: list[FunctionEvaluation] = []  # for the Pareto fronts
        self._keep_options(
            method=method,
            n_initial=n_initial,
            kernel=kernel,
            lengthscale=lengthscale,
            exploration=exploration,
            acquisitions=self.acquisitions,
            skip_threshold=skip_threshold,
            discount_factor=discount_factor,
            improvement_factor=improvement_factor,
            candidates=None if candidates is None else [dict(c) for c in candidates],
            objective=None if self.multiobjective else self.objective.name,
            avoid_failures=avoid_failures,
        )

    def new_portfolio(self) -> Portfolio:
        """A fresh portfolio for :attr:`method`."""
        if self.method == "multi":
            return Multi(self.acquisitions, self.skip_threshold, self.discount_factor)
        if self.method == "advanced_multi":
            return AdvancedMulti(self.acquisitions, self.skip_threshold, self.discount_factor, self.improvement_factor)
        return Single(self.method)

    def search(self, task: Mapping[str, Any] | None = None) -> TaskSearch:
        """The state of ``task`` (the first task by default), built on first use.

        Args:
            task: The task (default: the first).
        """
        number = 0 if task is None else self.task_index(task)
        key = task_key(self.tasks[number])
        if key not in self._searches:
            cands = self._explicit or CandidateSet.from_problem(self.problem, self.tasks[number])
            self._searches[key] = (MultiObjectiveSearch if self.multiobjective else TaskSearch)(self, number, cands)
        return self._searches[key]

    def candidates(self, task: Mapping[str, Any] | None = None) -> CandidateSet:
        """The valid configurations of ``task``.

        Args:
            task: The task (default: the first).
        """
        return self.search(task).cands

    def active_acquisitions(self, task: Mapping[str, Any] | None = None) -> list[str]:
        """The acquisition functions that propose in ``task``'s next round.

        Args:
            task: The task (default: the first).
        """
        return self.search(task).portfolio.active

    def exploration_factor(self, task: Mapping[str, Any] | None = None) -> float:
        """The exploration factor the next model round of ``task`` would use (needs two valid results).

        Args:
            task: The task (default: the first).
        """
        search = self.search(task)
        if len(search.values) < 2:
            raise InvalidInputError("task", "the exploration factor needs at least two successful evaluations")
        mean, std = search.gp.posterior()
        return search.exploration(std / search.gp.standardisation()[1], ~search.busy())

    # -- ask/tell ---------------------------------------------------------------------------------
    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """The next configuration: an initial design point, or the best acquisition value among the unvisited.

        Args:
            task: The task (default: the one with the fewest evaluations).
        """
        if task is None:
            task = min(self.tasks, key=lambda t: (lambda s: s.told + len(s.pending))(self.search(t)))
        search = self.search(task)
        pick = search.next_pick()
        search.pending[pick.index] = pick
        extra: dict[str, Any] = {"acquisitions": pick.afs, "round": pick.round} if pick.afs else {}
        extra.update(pick.notes)
        return Suggestion(
            task=dict(self.tasks[search.number]),
            config=dict(search.cands.configs[pick.index]),
            provenance=Provenance(engine=self.name, proposer=pick.proposer, **extra),
        )

    def add_pending(
        self, task: Mapping[str, Any], config: Mapping[str, Any], provenance: Provenance | None = None
    ) -> None:
        """Treat an adopted trial as asked and not yet told (:meth:`Engine.add_pending`), in the round its provenance names."""
        self.search(task).adopt(config, provenance)

    def _fold(self, record: FunctionEvaluation) -> None:
        """Fold in one evaluation; a failed one (or one without a finite objective) is never suggested again."""
        key = task_key(record.task_parameter)
        if not any(task_key(t) == key for t in self.tasks):
            return
        self._records.append(record)
        self.search(record.task_parameter).tell(record, self._value(record))

    def pareto_front(self, task: Mapping[str, Any] | None = None) -> list[FunctionEvaluation]:
        """The feasible evaluations of ``task`` (the first by default) that no other one dominates.

        Args:
            task: The task.
        """
        return pareto_front(self.problem, self._records, self.tasks[0] if task is None else task)

    def _value(self, record: FunctionEvaluation) -> float | None:
        if self.multiobjective:
            return multiobjective_value(self, record)
        value = record.value(self.objective.name)
        return None if value is None else self.objective.sign() * value
