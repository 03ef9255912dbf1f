"""DiscreteBO for several objectives and output constraints: one candidate GP per output, a Pareto score.

A task's :class:`MultiObjectiveSearch` keeps DiscreteBO's initial design, validity
model and bookkeeping; after the design each suggestion is the unvisited,
likely valid candidate with the best
:class:`~raytuner.engines.pareto_score.ParetoScore` (the expected
hypervolume improvement over the task's feasible front with two objectives,
a random Chebyshev scalarisation with more), times the probability of
meeting every output constraint (below 0.9, a candidate ranks after every
likelier one, by that probability alone), and a value at which the task's
likely successes broke a constraint far more often than that chance allows
lowers it further (:class:`~raytuner.engines.breaches.BreachValues`). The outputs share the GP's fixed length
scale, so one factorisation serves them all
(:meth:`~raytuner.engines.discrete.gp.CandidateGP.posterior_of`). The
score is computed by Monte Carlo on the :data:`SHORTLIST` candidates whose
optimistic point (each objective's mean less two standard deviations) scores
best, with the probability of meeting the constraints, or on all of them when fewer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from raytuner.engines.breaches import NOTE, BreachValues
from raytuner.engines.discrete.candidates import CandidateSet
from raytuner.engines.discrete.search import Pick, TaskSearch
from raytuner.engines.pareto_score import CONFIDENT, DRAWS, ParetoScore, chance_within
from raytuner.errors import InfeasibleSpaceError
from raytuner.problem.records import FunctionEvaluation

__all__ = ["MultiObjectiveSearch", "SHORTLIST"]

#: Candidates scored by Monte Carlo in each round (the rest are ranked by their optimistic point first).
SHORTLIST = 1024


class MultiObjectiveSearch(TaskSearch):
    """DiscreteBO's state for one task of a problem with several objectives or output constraints.

    Args:
        engine: the :class:`~raytuner.engines.discrete.DiscreteBO` (its ``modelled`` outputs).
        number: the task's index.
        candidates: the task's valid configurations.
    """

    def __init__(self, engine: Any, number: int, candidates: CandidateSet) -> None:
        super().__init__(engine, number, candidates)
        self.outputs = engine.modelled
        #: Per successful evaluation, in the GP's order: each modelled output's value.
        self.rows: list[list[float]] = []
        self.feasible: list[bool] = []
        #: Per likely success told with every modelled output (:data:`~raytuner.engines.breaches.NOTE`): its
        #: candidate index and whether it broke a constraint.
        self.guided: list[tuple[int, bool]] = []

    def tell(self, record: FunctionEvaluation, value: float | None) -> None:
        """Fold in one evaluation (``value``: the first objective, ``None`` when it failed).

        Args:
            record: the evaluation.
            value: its first objective to minimise, or ``None``.
        """
        before = len(self.gp)
        super().tell(record, value)
        if len(self.gp) > before:
            self.rows.append([record.value(o.name) for o in self.outputs])  # type: ignore[misc]  # told values of a told record: no None
            self.feasible.append(self.engine.problem.meets_output_constraints(record.evaluation_result))
            if (
                record.raytuner is not None
                and record.raytuner.engine == self.engine.name
                and (record.raytuner.model_extra or {}).get(NOTE) is True
            ):
                self.guided.append((self.gp.indices[-1], not self.feasible[-1]))

    def model_round(self) -> None:
        """Queue the candidate with the best Pareto score."""
        free = ~self.busy()
        if not free.any():
            raise InfeasibleSpaceError("every valid configuration has been evaluated")
        chosen = np.flatnonzero(self.likely_valid(free))
        means, sds = self.gp.posterior_of(np.array(self.rows))  # each output's, in its own units
        objectives = [k for k, o in enumerate(self.outputs) if o.optimize]
        signs = np.array([self.outputs[k].sign() for k in objectives])
        seen = np.array(self.rows)[:, objectives] * signs  # to minimise
        good = seen[np.array(self.feasible, dtype=bool)]
        rng = np.random.default_rng([self.engine.seed or 0, self.number, 3, self.told, len(self.pending)])
        pareto = ParetoScore(
            seen,
            good,
            rng.dirichlet(np.ones(len(objectives))),
            np.array([self.outputs[k].minimised_bounds() for k in objectives]),
        )
        chance = np.ones(len(means[0]))
        for k, o in enumerate(self.outputs):
            if o.bounded:
                chance = chance * chance_within(means[k], sds[k], o.lower_bound, o.upper_bound)
        if self.guided:  # a likely success when chosen: values where such breaches surprise
            picked, broke = (np.array(v) for v in zip(*self.guided))
            chance = chance * BreachValues(
                self.cands.units[picked], broke.astype(bool), np.full(len(picked), CONFIDENT)
            ).factor(self.cands.units)
        if len(chosen) > SHORTLIST:
            quick = pareto.optimistic(
                (means[objectives] * signs[:, None]).T[chosen], sds[objectives].T[chosen], chance[chosen]
            )
            chosen = chosen[np.argsort(-quick, kind="stable")[:SHORTLIST]]
        mean, sd = (means[objectives] * signs[:, None]).T[chosen], sds[objectives].T[chosen]
        samples = mean[:, None, :] + sd[:, None, :] * rng.standard_normal((DRAWS, len(objectives)))[None]
        scores = pareto(mean, samples, chance[chosen])
        best = int(np.argmax(scores))
        confident = any(o.bounded for o in self.outputs) and ParetoScore.likely_success(float(scores[best]))
        self.queue.append(Pick(int(chosen[best]), "model", notes={NOTE: True} if confident else {}))


def multiobjective_value(engine: Any, record: FunctionEvaluation) -> float | None:
    """The first objective to minimise of ``record``, or ``None`` when any modelled output is missing.

    Args:
        engine: the engine (its ``objective`` and ``modelled`` outputs).
        record: the evaluation.
    """
    if any(record.value(o.name) is None for o in engine.modelled):
        return None
    return engine.objective.sign() * record.value(engine.objective.name)
