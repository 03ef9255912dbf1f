"""TransferLearning: tune a target task from source data with one TLA algorithm or an ensemble.

The engine is a fold over the target's evaluation log, like every
engine. Each suggestion is proposed by one algorithm of the TLA pool
(:mod:`raytuner.engines.transfer.algorithms`) — the engine's own
``algorithm``, or for an ensemble the one chosen by
:func:`~raytuner.engines.transfer.ensemble.choose_algorithm` — and its
name is written into the suggestion's provenance (``engine``), hence into
the record's ``modeling`` field. The ensemble's statistics (best value per
algorithm, number of samples, whose turn it is) are rebuilt from those
fields on replay, and every random draw and model fit is seeded from the
seed and the counts in the log, so a resumed engine continues exactly where
the old one stopped.

An ensemble adds one rule to Algorithm 1: when the chosen algorithm
proposes a point within :data:`REPEAT_DISTANCE` of one the target already
has (an exploiting model stuck in a basin re-measures the same point, which
teaches nothing and costs an evaluation), the next algorithm drawn from the
rest of the pool proposes instead.

Points within :data:`REPEAT_DISTANCE` of a failed or pending target
evaluation are not proposed by any algorithm: a model that leaves failures
out would otherwise return to the edge of a failing region again and again,
and a batch of parallel trials would collapse onto one point.

The first evaluation, with no target data, is proposed by
WeightedSum(equal) over the sources, as in the paper. Failed target
evaluations are never suggested again and are left out of every model.
With ``candidates`` (a discrete space given as its list of valid
configurations, e.g. a GPU kernel's), the acquisition function is evaluated
at every unvisited candidate; otherwise it is optimised over the parameter
space as MLA does.

Example:
    >>> import numpy as np
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.models import LCMOptions
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM, demo
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> rng = np.random.default_rng(0)
    >>> source = [FunctionEvaluation.create({"t": 0.8}, {"x": x}, {"y": demo(x, 0.8)}) for x in rng.random(40)]
    >>> engine = TransferLearning(problem, {"t": 1.0}, source, "ensemble", seed=0,
    ...                           lcm=LCMOptions(n_starts=2), executor=InlineExecutor())
    >>> for _ in range(4):
    ...     s = engine.ask()
    ...     record = engine.tell(s, {"y": demo(s.config["x"], 1.0)})
    >>> engine.proposers[0], all(p in DEFAULT_POOL for p in engine.proposers[1:])
    ('weighted_sum_equal', True)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from raytuner.engines.base import Engine, Suggestion
from raytuner.engines.transfer.algorithms import BUILDERS, FitContext, TargetData
from raytuner.engines.transfer.data import SOURCE_SEED, SourceData, minimisation_values
from raytuner.engines.transfer.ensemble import POLICIES, choose_algorithm, ensemble_probabilities, exploration_rate
from raytuner.engines.transfer.surrogates import TargetModel
from raytuner.errors import InfeasibleSpaceError, InvalidInputError
from raytuner.models import LCMOptions
from raytuner.models.acquisition import acquisition_function, optimize_acquisition
from raytuner.models.blas import one_blas_thread
from raytuner.models.executors import Executor
from raytuner.problem.records import EvaluationSource, FunctionEvaluation, Provenance, task_key
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace

__all__ = ["TransferLearning", "ALGORITHMS", "SINGLE_ALGORITHMS", "ENSEMBLES", "DEFAULT_POOL", "FIRST"]

log = logging.getLogger(__name__)

#: The pool's algorithms, usable alone or in an ensemble.
SINGLE_ALGORITHMS: tuple[str, ...] = tuple(BUILDERS)
#: The ensembles: Ensemble(proposed) is ``"ensemble"``.
ENSEMBLES: tuple[str, ...] = tuple(POLICIES)
#: Every value of ``algorithm``.
ALGORITHMS: tuple[str, ...] = SINGLE_ALGORITHMS + ENSEMBLES
#: The ensemble's default pool (Algorithm 1, line 1).
DEFAULT_POOL: tuple[str, ...] = ("multitask_ts", "weighted_sum_dynamic", "stacking")
#: The algorithm of the first evaluation, which has no target data.
FIRST = "weighted_sum_equal"
#: An ensemble skips an algorithm whose proposal is this close (unit cube, every coordinate) to a target point.
REPEAT_DISTANCE = 0.002


class TransferLearning(Engine):
    """Tune ``target_task`` using ``source`` evaluations; see the module docstring.

    Args:
        problem: The problem's spaces.
        target_task: The task to tune.
        source: A :class:`SourceData` (shareable between engines), a list of
            :class:`FunctionEvaluation` or an :class:`EvaluationSource` such as
            :class:`raytuner.store.StoreSource`.
        algorithm: One of :data:`ALGORITHMS`.
        seed: Seeds every random draw and model fit.
        pool: The algorithms an ensemble chooses from.
        weights: The static weights of ``weighted_sum_static`` (one per source task, then the target).
        candidates: The valid configurations of a discrete space (the acquisition is evaluated at
            every unvisited one); ``None``: search the parameter space.
        lcm: Configure the GP/LCM fits.
        acquisition: ``"ei"``, ``"pi"`` or ``"lcb"``.
        acquisition_options: The acquisition's parameters (``xi``, ``beta``).
        objective: The objective to tune (default: the first).
        executor: Runs the multi-start fits (default: :func:`raytuner.models.executors.default_executor`).
        search_candidates: How many random points the continuous search's global phase scores.
    """

    name = "transfer"

    def __init__(
        self,
        problem: ProblemSpace,
        target_task: Mapping[str, Any],
        source: SourceData | Sequence[FunctionEvaluation] | EvaluationSource,
        algorithm: str = "ensemble",
        seed: int | None = None,
        *,
        pool: Sequence[str] = DEFAULT_POOL,
        weights: Sequence[float] | None = None,
        candidates: Sequence[Mapping[str, Any]] | None = None,
        lcm: LCMOptions | None = None,
        acquisition: str = "ei",
        acquisition_options: Mapping[str, float] | None = None,
        objective: str | None = None,
        executor: Executor | None = None,
        search_candidates: int = 2048,
    ) -> None:
        super().__init__(problem, [target_task], seed)
        if algorithm not in ALGORITHMS:
            raise InvalidInputError("algorithm", f"unknown TLA algorithm {algorithm!r}", allowed=list(ALGORITHMS))
        self.pool = _check_pool(pool)
        self.algorithm = algorithm
        self.objective = problem.objective(objective)
        requested = lcm or LCMOptions()
        self.options = requested.over(problem.parameter_space)
        self.executor = executor
        self.source = (
            source
            if isinstance(source, SourceData)
            else SourceData(problem, source, objective=self.objective.name, lcm=self.options, executor=executor)
        )
        self.weights = _check_weights(weights, algorithm, self.pool, len(self.source))
        self.acquisition = acquisition_function(acquisition, **dict(acquisition_options or {}))
        self.search_candidates = search_candidates
        self.candidates = (
            None
            if candidates is None
            else [problem.parameter_space.check(c, f"candidates[{i}]") for i, c in enumerate(candidates)]
        )
        self._candidate_units = None if self.candidates is None else problem.parameter_space.encode(self.candidates)
        self.records: list[FunctionEvaluation] = []
        self.proposers: list[str] = []
        self.pending: list[tuple[dict[str, Any], str]] = []
        self._visited: set[tuple[tuple[str, Any], ...]] = set()
        self._target_uids: set[str] = set()
        self._keep_options(
            algorithm=algorithm,
            pool=self.pool,
            weights=self.weights,
            candidates=self.candidates,
            lcm=requested,
            acquisition=acquisition,
            acquisition_options=acquisition_options,
            objective=self.objective.name,
            search_candidates=search_candidates,
        )

    @property
    def target(self) -> dict[str, Any]:
        """The target task."""
        return self.tasks[0]

    # -- the ensemble's view of the log ----------------------------------------------------------
    def _observed(self) -> tuple[list[FunctionEvaluation], np.ndarray]:
        return minimisation_values(self.problem, self.records, self.objective.name)

    def best_per_algorithm(self) -> dict[str, float | None]:
        """The best target value each pool algorithm proposed (``None``: nothing successful yet)."""
        best: dict[str, float | None] = {name: None for name in self.pool}
        sign = self.objective.sign()
        for record, proposer in zip(self.records, self.proposers):
            value = record.value(self.objective.name)
            if proposer in best and value is not None and np.isfinite(value):
                current = best[proposer]
                best[proposer] = value if current is None or sign * value < sign * current else current
        return best

    def probabilities(self) -> dict[str, float]:
        """Equation 3 over the pool now."""
        best = self.best_per_algorithm()
        kept, _ = self._observed()
        observed = [r.known_value(self.objective.name) for r in kept]
        p = ensemble_probabilities([best[n] for n in self.pool], observed, self.objective.goal)
        return dict(zip(self.pool, p.tolist()))

    def exploration_rate(self) -> float:
        """Equation 4 now."""
        return exploration_rate(len(self.pool), self.problem.parameter_space.dimension, len(self.records))

    def _choose(self, rng: np.random.Generator, skipped: Sequence[str] = ()) -> str:
        kept, _ = self._observed()
        if not kept:
            return FIRST
        if self.algorithm not in POLICIES:
            return self.algorithm
        pool = [n for n in self.pool if n not in skipped]
        turn = sum(p in self.pool for p in self.proposers) + sum(p in self.pool for _, p in self.pending)
        best = self.best_per_algorithm()
        observed = [r.known_value(self.objective.name) for r in kept]
        return choose_algorithm(
            POLICIES[self.algorithm],
            pool,
            [best[n] for n in pool],
            observed,
            self.objective.goal,
            self.problem.parameter_space.dimension,
            len(self.records),
            turn + len(skipped),
            rng,
        )

    def _repeats(self, config: Mapping[str, Any]) -> bool:
        """Whether ``config`` lies within :data:`REPEAT_DISTANCE` (unit cube, every coordinate) of a target point."""
        known = self._exclude()
        if not known:
            return False
        space = self.problem.parameter_space
        gap = np.abs(space.encode(known) - space.encode([config]))
        return bool(np.any(np.all(gap <= REPEAT_DISTANCE, axis=1)))

    # -- ask ---------------------------------------------------------------------------------------
    def _stream(self, key: int) -> np.random.Generator:
        return np.random.default_rng(
            np.random.SeedSequence([self.seed or 0, len(self.records), len(self.pending), key])
        )

    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """The next configuration for the target, with the proposing algorithm in its provenance.

        Args:
            task: The target task, or ``None``.
        """
        if task is not None:
            self.task_index(task)
        rng = self._stream(1)
        skipped: list[str] = []
        with one_blas_thread():  # small matrices: one BLAS thread is faster
            while True:
                proposer = self._choose(rng, skipped)
                config, how = self._propose(proposer)
                if (
                    self.algorithm not in POLICIES
                    or proposer not in self.pool
                    or len(skipped) + 1 >= len(self.pool)
                    or not self._repeats(config)
                ):
                    break
                log.debug("%s proposed a point the target already has; another algorithm proposes", proposer)
                skipped.append(proposer)
        self.pending.append((config, proposer))
        return Suggestion(
            task=dict(self.target),
            config=config,
            provenance=Provenance(engine=proposer, proposer=how, tla=self.algorithm),
        )

    def _exclude(self) -> list[dict[str, Any]]:
        return [dict(r.tuning_parameter) for r in self.records] + [c for c, _ in self.pending]

    def _propose(self, proposer: str) -> tuple[dict[str, Any], str]:
        try:
            model = BUILDERS[proposer](self.source, self._target_data(), self._context())
        except Exception:  # a numerical failure must not end a tuning run
            log.exception("%s failed to build its model; suggesting a random configuration", proposer)
            return self._random(), "random"
        return self._search(model), "model"

    def _target_data(self) -> TargetData:
        kept, v = self._observed()
        space = self.problem.parameter_space
        d = space.dimension
        X = space.encode([r.tuning_parameter for r in kept]) if kept else np.empty((0, d))
        pending = space.encode([c for c, _ in self.pending]) if self.pending else np.empty((0, d))
        return TargetData(X, v, pending)

    def _context(self) -> FitContext:
        weights = None if self.weights is None else np.asarray(self.weights)
        return FitContext(self.options, self.executor, self._stream(2), self._design, weights)

    def _design(self, n: int) -> np.ndarray:
        """A fixed design of ``n`` valid points (Multitask(PS)'s pseudo-sample points)."""
        rng = np.random.default_rng(SOURCE_SEED)
        if self._candidate_units is not None:
            idx = rng.choice(len(self._candidate_units), size=min(n, len(self._candidate_units)), replace=False)
            return self._candidate_units[np.sort(idx)]
        configs = sample_configurations(self.problem, self.target, n, seed=rng)
        return self.problem.parameter_space.encode(configs)

    def _unvisited(self) -> np.ndarray:
        assert self.candidates is not None
        taken = self._visited | {task_key(c) for c, _ in self.pending}
        free = np.array([task_key(c) not in taken for c in self.candidates], dtype=bool)
        if not free.any():
            raise InfeasibleSpaceError("every candidate configuration has been evaluated")
        return np.flatnonzero(free)

    def _random(self) -> dict[str, Any]:
        rng = self._stream(3)
        if self.candidates is not None:
            return dict(self.candidates[int(rng.choice(self._unvisited()))])
        return sample_configurations(self.problem, self.target, 1, seed=rng, exclude=self._exclude())[0]

    def _search(self, model: TargetModel) -> dict[str, Any]:
        space = self.problem.parameter_space
        failed = [r.tuning_parameter for r in self.records if r.status != "ok"] + [c for c, _ in self.pending]
        avoid = space.encode(failed) if failed else np.empty((0, space.dimension))

        def score(U: np.ndarray) -> np.ndarray:
            mean, std = model.predict(U)
            values = np.asarray(self.acquisition(mean, std, model.incumbent), dtype=float)
            if len(avoid):  # next to a failure or a pending point: nothing to learn there
                near = np.any(np.all(np.abs(U[:, None, :] - avoid[None, :, :]) <= REPEAT_DISTANCE, axis=2), axis=1)
                values = np.where(near, -np.inf, values)
            return values

        if self.candidates is not None:
            free = self._unvisited()
            values = score(self._candidate_units[free])  # type: ignore[index]  # set with self.candidates
            return dict(self.candidates[int(free[int(np.argmax(values))])])
        config, _ = optimize_acquisition(
            self.problem,
            self.target,
            score,
            rng=self._stream(4),
            exclude=self._exclude(),
            search_candidates=self.search_candidates,
        )
        return config

    # -- tell --------------------------------------------------------------------------------------
    def add_pending(
        self, task: Mapping[str, Any], config: Mapping[str, Any], provenance: Provenance | None = None
    ) -> None:
        """Count an adopted trial as pending, proposed by the algorithm its provenance names.

        Args:
            task: The target task.
            config: Its configuration.
            provenance: What the engine wrote when it asked (the proposing algorithm).
        """
        self.task_index(task)
        proposer = provenance.engine if provenance is not None and provenance.engine else ""
        self.pending.append((dict(config), proposer))

    def _fold(self, record: FunctionEvaluation) -> None:
        """Fold a target evaluation in (other tasks' records, source records and repeats are ignored)."""
        if (
            task_key(record.task_parameter) != task_key(self.target)
            or record.uid in self._target_uids
            or record.uid in self.source.uids
        ):
            return
        self._target_uids.add(record.uid)
        self.records.append(record)
        proposer = record.modeling or (record.raytuner.engine if record.raytuner else None) or ""
        self.proposers.append(proposer)
        key = task_key(record.tuning_parameter)
        self._visited.add(key)
        for j, (config, _) in enumerate(self.pending):
            if task_key(config) == key:
                del self.pending[j]
                break


def _check_pool(pool: Sequence[str]) -> tuple[str, ...]:
    names = tuple(pool)
    if not names or len(set(names)) != len(names) or any(n not in SINGLE_ALGORITHMS for n in names):
        raise InvalidInputError(
            "pool", f"must list distinct TLA algorithms, got {list(names)}", allowed=list(SINGLE_ALGORITHMS)
        )
    return names


def _check_weights(
    weights: Sequence[float] | None, algorithm: str, pool: Sequence[str], sources: int
) -> list[float] | None:
    if algorithm != "weighted_sum_static" and not (algorithm in ENSEMBLES and "weighted_sum_static" in pool):
        if weights is not None:
            raise InvalidInputError("weights", f"only weighted_sum_static takes weights, not {algorithm}")
        return None
    if weights is None or len(weights) != sources + 1 or not all(np.isfinite(w) and w >= 0 for w in weights):
        raise InvalidInputError(
            "weights",
            f"weighted_sum_static needs {sources + 1} non-negative weights "
            f"(one per source task, then the target), got {weights!r}",
        )
    return [float(w) for w in weights]
