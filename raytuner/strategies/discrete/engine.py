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
out the candidates it predicts below 0.5 while others remain. On the
benchmark this cut pnpoly's error from 0.25 to 0.04: Kernel Tuner's pnpoly
cache has 318 failed configurations among 4,092, clustered where the
objective's trend points, and without it the search spent most of its 200
evaluations on them. The initial sample is a
maximin Latin hypercube design; design points that the restrictions rule
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
    >>> from raytuner.space import ProblemSpace
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
    >>> s.provenance.source, s.config["bx"] * s.config["tile"] <= 512
    ('model', True)
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from raytuner.errors import InfeasibleSpaceError, InvalidInputError
from raytuner.records import FunctionEvaluation, Provenance, task_key
from raytuner.space import ProblemSpace
from raytuner.strategies.base import Strategy, Suggestion
from raytuner.strategies.discrete.candidates import CandidateSet
from raytuner.strategies.discrete.gp import KERNELS, CandidateGP
from raytuner.strategies.discrete.portfolio import (AFS, AdvancedMulti, Multi, Portfolio, Single,
                                                    contextual_variance, scores)

__all__ = ["DiscreteBO", "METHODS"]

log = logging.getLogger(__name__)

Method = Literal["advanced_multi", "multi", "ei", "pi", "lcb"]
#: The acquisition methods: the two portfolios, then the single functions.
METHODS: tuple[str, ...] = ("advanced_multi", "multi", "ei", "pi", "lcb")
_DISCOUNT = {"multi": 0.65, "advanced_multi": 0.75}
#: The validity model's length scale, relative to the objective model's.
VALIDITY_SCALE = 1.0
#: A candidate whose predicted validity is below this is not proposed while others are left.
VALIDITY_THRESHOLD = 0.5


@dataclass
class _Pick:
    """A candidate handed out (or queued): which functions chose it, in which round, how."""

    index: int
    source: str
    afs: list[str] = field(default_factory=list)
    round: int | None = None


@dataclass
class _Round:
    """The results of one portfolio round: candidate -> (functions, minimised value or None)."""

    median_before: float | None
    results: dict[int, tuple[list[str], float | None]] = field(default_factory=dict)


class _TaskSearch:
    """DiscreteBO's state for one task."""

    def __init__(self, engine: "DiscreteBO", number: int, candidates: CandidateSet) -> None:
        self.engine = engine
        self.number = number
        self.cands = candidates
        self.gp = CandidateGP(candidates.units, engine.kernel, engine.lengthscale)
        # where evaluations failed: a separate GP on validity labels (1 ok, 0 failed); the objective's GP
        # never sees a failure
        self.validity = CandidateGP(candidates.units, engine.kernel, engine.lengthscale * VALIDITY_SCALE)
        self.visited = np.zeros(len(candidates), dtype=bool)
        self.pending: dict[int, _Pick] = {}
        self.queue: deque[_Pick] = deque()
        self.values: list[float] = []
        self.initial: list[tuple[int, float | None]] = []
        self.rounds: dict[int, _Round] = {}
        self.next_round = 0
        self.finalised = 0
        self.told = 0
        self.portfolio = engine.new_portfolio()
        rng = np.random.default_rng([engine.seed or 0, number, 1])
        self.design = candidates.latin_hypercube(engine.n_initial, rng)
        self._initial_variance: float | None = None

    # -- bookkeeping ------------------------------------------------------------------------------
    def busy(self) -> np.ndarray:
        """Candidates that are told, pending or queued."""
        taken = self.visited.copy()
        taken[list(self.pending)] = True
        taken[[p.index for p in self.queue]] = True
        return taken

    def rng(self) -> np.random.Generator:
        return np.random.default_rng([self.engine.seed or 0, self.number, 2, self.told, len(self.pending)])

    def random_free(self) -> int:
        free = np.flatnonzero(~self.busy())
        if not len(free):
            raise InfeasibleSpaceError("every valid configuration has been evaluated")
        return int(self.rng().choice(free))

    # -- tell -------------------------------------------------------------------------------------
    def tell(self, record: FunctionEvaluation, value: float | None) -> None:
        index = self.cands.locate(record.tuning_parameter)
        if index is None:
            log.warning("ignoring a record whose configuration %s is not a valid candidate",
                        record.tuning_parameter)
            return
        if self.visited[index]:
            return
        self.visited[index] = True
        self.told += 1
        pick = self.pending.pop(index, None)
        prov = record.raytuner or Provenance()
        extra = prov.model_extra or {}
        source = prov.source or (pick.source if pick else "")
        afs = list(extra.get("acquisitions") or (pick.afs if pick else []))
        number = extra.get("round", pick.round if pick else None)
        median = float(np.median(self.values)) if self.values else None
        self.validity.add(index, 0.0 if value is None else 1.0)
        if value is not None:
            self.gp.add(index, value)
            self.values.append(value)
        if source == "initial":
            self.initial.append((index, value))
        if number is not None and afs:
            number = int(number)
            self.rounds.setdefault(number, _Round(median)).results[index] = (afs, value)
            self.next_round = max(self.next_round, number + 1)

    def adopt(self, config: Mapping[str, Any], provenance: Provenance | None) -> None:
        index = self.cands.locate(config)
        if index is None or self.visited[index]:
            return
        extra = (provenance.model_extra if provenance else None) or {}
        self.pending[index] = _Pick(index, (provenance.source if provenance else None) or "model",
                                    list(extra.get("acquisitions") or []), extra.get("round"))

    # -- ask --------------------------------------------------------------------------------------
    def next_pick(self) -> _Pick:
        self.finalise_rounds()
        while self.queue:
            pick = self.queue.popleft()
            if not self.visited[pick.index] and pick.index not in self.pending:
                return pick
        n_valid = len(self.values)
        initial_pending = sum(p.source == "initial" for p in self.pending.values())
        if n_valid + initial_pending < self.engine.n_initial:
            return _Pick(self.initial_index(), "initial")
        if n_valid < 2:
            return _Pick(self.random_free(), "random")
        self.model_round()
        return self.queue.popleft()

    def initial_index(self) -> int:
        busy = self.busy()
        for index in self.design:
            if index is not None and not busy[index]:
                return index
        return self.random_free()

    def finalise_rounds(self) -> None:
        """Fold finished rounds into the portfolio, in round order."""
        outstanding = {p.round for p in list(self.pending.values()) + list(self.queue)}
        while self.finalised < self.next_round and self.finalised not in outstanding:
            number = self.finalised
            self.finalised += 1
            done = self.rounds.get(number)
            if done is None:
                continue
            fill = done.median_before if done.median_before is not None else (
                float(np.median(self.values)) if self.values else None)
            observed: dict[str, float] = {}
            duplicates: set[str] = set()
            for afs, value in done.results.values():
                if len(afs) > 1:
                    duplicates.update(afs)
                v = value if value is not None else fill
                if v is not None:
                    observed.update({af: v for af in afs})
            self.portfolio.end_round(observed, duplicates)

    def initial_variance(self) -> float:
        """Mean prior-relative posterior variance over the non-initial candidates after the initial sample."""
        if self._initial_variance is None:
            points = [i for i, v in self.initial if v is not None] or self.gp.indices[:self.engine.n_initial]
            gp = CandidateGP(self.cands.units, self.engine.kernel, self.engine.lengthscale)
            for i in points:
                gp.add(i, 0.0)
            rest = np.ones(len(self.cands), dtype=bool)
            rest[points] = False
            self._initial_variance = float(np.mean(1.0 - gp._explained[rest])) if rest.any() else 0.0
        return self._initial_variance

    def exploration(self, std_z: np.ndarray, free: np.ndarray) -> float:
        if self.engine.exploration != "cv":
            return float(self.engine.exploration)
        initial = [v for _, v in self.initial if v is not None] or self.values[:self.engine.n_initial]
        return contextual_variance(float(np.mean(std_z[free] ** 2)), self.initial_variance(),
                                   float(np.mean(initial)), float(min(self.values)))

    def likely_valid(self, free: np.ndarray) -> np.ndarray:
        """The free candidates the validity model predicts to succeed (all free ones before any failure)."""
        if not self.engine.avoid_failures or len(self.values) == self.told:
            return free
        validity, _ = self.validity.posterior()
        likely = free & (validity >= VALIDITY_THRESHOLD)
        return likely if likely.any() else free

    def model_round(self) -> None:
        free = ~self.busy()
        if not free.any():
            raise InfeasibleSpaceError("every valid configuration has been evaluated")
        mean, std = self.gp.posterior()
        offset, scale = self.gp.standardisation()
        mean_z, std_z = (mean - offset) / scale, std / scale
        best_z = (min(self.values) - offset) / scale
        lam = self.exploration(std_z, free)
        likely = self.likely_valid(free)
        open_ = likely.copy()
        picks: dict[int, list[str]] = {}
        for af in self.portfolio.active:
            allowed = likely if self.portfolio.shares_candidates else open_
            if not allowed.any():
                break
            values = np.where(allowed, scores(af, mean_z, std_z, best_z, lam), -np.inf)
            index = int(np.argmax(values))
            picks.setdefault(index, []).append(af)
            open_[index] = False
        number = self.next_round
        self.next_round += 1
        self.queue.extend(_Pick(i, "model", afs, number) for i, afs in picks.items())
        log.debug("round %d: exploration %.4g, picks %s", number, lam, picks)


class DiscreteBO(Strategy):
    """Bayesian optimisation over an enumerated set of valid discrete configurations.

    Suggestions carry ``source`` (``"initial"``, ``"random"`` or
    ``"model"``) and, for model picks, ``acquisitions`` and ``round`` in
    their provenance.

    Args:
        problem: Its tuning parameters must have listed values (categorical,
            or integers); its constraints are the kernel's restrictions.
        tasks: Each is tuned on its own; default: the one empty task of a
            problem without task parameters.
        seed: Seeds the initial design and every random pick.
        method: One of :data:`METHODS` (default ``"ei"``: the lowest MDF on
            the benchmark's four kernels, 0.45 against multi's 0.49 and
            advanced multi's 0.65).
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
    spec_name = "discrete"

    def __init__(self, problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]] | None = None,
                 seed: int | None = None, *, method: Method = "ei", n_initial: int = 20,
                 kernel: str = "matern32", lengthscale: float | None = None,
                 exploration: Literal["cv"] | float = "cv", acquisitions: Sequence[str] = AFS,
                 skip_threshold: int = 5, discount_factor: float | None = None,
                 improvement_factor: float = 0.1, candidates: Sequence[Mapping[str, Any]] | None = None,
                 objective: str | None = None, avoid_failures: bool = True) -> None:
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
            raise InvalidInputError("exploration", f"must be 'cv' or a number >= 0, got {exploration!r}",
                                    allowed=["cv", "a number >= 0"])
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
        Portfolio(self.acquisitions)              # validates the acquisitions, whatever the method
        self.objective = problem.objective(objective)
        self._explicit = None if candidates is None else CandidateSet.from_configs(problem, candidates)
        self._searches: dict[str, _TaskSearch] = {}
        self._keep_options(method=method, n_initial=n_initial, kernel=kernel, lengthscale=lengthscale,
                           exploration=exploration, acquisitions=self.acquisitions, skip_threshold=skip_threshold,
                           discount_factor=discount_factor, improvement_factor=improvement_factor,
                           candidates=None if candidates is None else [dict(c) for c in candidates],
                           objective=self.objective.name, avoid_failures=avoid_failures)

    def new_portfolio(self) -> Portfolio:
        """A fresh portfolio for :attr:`method`."""
        if self.method == "multi":
            return Multi(self.acquisitions, self.skip_threshold, self.discount_factor)
        if self.method == "advanced_multi":
            return AdvancedMulti(self.acquisitions, self.skip_threshold, self.discount_factor,
                                 self.improvement_factor)
        return Single(self.method)

    def search(self, task: Mapping[str, Any] | None = None) -> _TaskSearch:
        """The state of ``task`` (the first task by default), built on first use.

        Args:
            task: The task (default: the first).
        """
        number = 0 if task is None else self.task_index(task)
        key = task_key(self.tasks[number])
        if key not in self._searches:
            cands = self._explicit or CandidateSet.from_problem(self.problem, self.tasks[number])
            self._searches[key] = _TaskSearch(self, number, cands)
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
        return Suggestion(task=dict(self.tasks[search.number]), config=dict(search.cands.configs[pick.index]),
                          provenance=Provenance(strategy=self.name, source=pick.source, **extra))

    def add_pending(self, task: Mapping[str, Any], config: Mapping[str, Any],
                    provenance: Provenance | None = None) -> None:
        """Treat an adopted trial as asked and not yet told.

        Args:
            task: The trial's task.
            config: Its configuration.
            provenance: What the engine wrote when it asked (source, acquisitions, round).
        """
        self.search(task).adopt(config, provenance)

    def _fold(self, record: FunctionEvaluation) -> None:
        """Fold in one evaluation; a failed one (or one without a finite objective) is never suggested again."""
        key = task_key(record.task_parameter)
        if not any(task_key(t) == key for t in self.tasks):
            return
        self.search(record.task_parameter).tell(record, self._value(record))

    def _value(self, record: FunctionEvaluation) -> float | None:
        value = record.value(self.objective.name)
        return None if value is None else self.objective.sign() * value
