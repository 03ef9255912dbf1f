"""DiscreteBO's state for one task: its candidate GPs, what is pending, and its acquisition rounds.

:class:`TaskSearch` holds what :class:`~raytuner.engines.discrete.DiscreteBO`
knows of one task (see that module for the method);
:class:`~raytuner.engines.discrete.multiobjective.MultiObjectiveSearch` extends it to several
objectives and output constraints.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytuner.engines.discrete.candidates import CandidateSet
from raytuner.engines.discrete.gp import CandidateGP
from raytuner.engines.discrete.portfolio import contextual_variance, scores
from raytuner.errors import InfeasibleSpaceError
from raytuner.problem.records import FunctionEvaluation, Provenance

__all__ = ["TaskSearch", "Pick", "VALIDITY_SCALE", "VALIDITY_THRESHOLD"]

log = logging.getLogger("raytuner.engines.discrete.engine")

#: The validity model's length scale, relative to the objective model's.
VALIDITY_SCALE = 1.0
#: A candidate whose predicted validity is below this is not proposed while others are left.
VALIDITY_THRESHOLD = 0.5


@dataclass
class Pick:
    """A candidate handed out (or queued): which functions chose it, in which round, how."""

    index: int
    proposer: str
    afs: list[str] = field(default_factory=list)
    round: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # added to the suggestion's provenance


@dataclass
class _Round:
    """The results of one portfolio round: candidate -> (functions, minimised value or None)."""

    median_before: float | None
    results: dict[int, tuple[list[str], float | None]] = field(default_factory=dict)


class TaskSearch:
    """DiscreteBO's state for one task.

    Args:
        engine: the :class:`~raytuner.engines.discrete.DiscreteBO` (its options).
        number: the task's index.
        candidates: the task's valid configurations.
    """

    def __init__(self, engine: Any, number: int, candidates: CandidateSet) -> None:
        self.engine = engine
        self.number = number
        self.cands = candidates
        self.gp = CandidateGP(candidates.units, engine.kernel, engine.lengthscale)
        # where evaluations failed: a separate GP on validity labels (1 ok, 0 failed); the objective's GP
        # never sees a failure
        self.validity = CandidateGP(candidates.units, engine.kernel, engine.lengthscale * VALIDITY_SCALE)
        self.visited = np.zeros(len(candidates), dtype=bool)
        self.pending: dict[int, Pick] = {}
        self.queue: deque[Pick] = deque()
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
        """The random stream of the next pick (seeded by the engine, the task and what is told and pending)."""
        return np.random.default_rng([self.engine.seed or 0, self.number, 2, self.told, len(self.pending)])

    def random_free(self) -> int:
        """A random candidate that is neither told, pending nor queued."""
        free = np.flatnonzero(~self.busy())
        if not len(free):
            raise InfeasibleSpaceError("every valid configuration has been evaluated")
        return int(self.rng().choice(free))

    # -- tell -------------------------------------------------------------------------------------
    def tell(self, record: FunctionEvaluation, value: float | None) -> None:
        """Fold in one evaluation of this task (a second one of a candidate is ignored).

        Args:
            record: the evaluation.
            value: its objective to minimise, or ``None`` when it failed.
        """
        index = self.cands.locate(record.tuning_parameter)
        if index is None:
            log.warning("ignoring a record whose configuration %s is not a valid candidate", record.tuning_parameter)
            return
        if self.visited[index]:
            return
        self.visited[index] = True
        self.told += 1
        pick = self.pending.pop(index, None)
        prov = record.raytuner or Provenance()
        extra = prov.model_extra or {}
        proposer = prov.proposer or (pick.proposer if pick else "")
        afs = list(extra.get("acquisitions") or (pick.afs if pick else []))
        number = extra.get("round", pick.round if pick else None)
        median = float(np.median(self.values)) if self.values else None
        self.validity.add(index, 0.0 if value is None else 1.0)
        if value is not None:
            self.gp.add(index, value)
            self.values.append(value)
        if proposer == "initial":
            self.initial.append((index, value))
        if number is not None and afs:
            number = int(number)
            self.rounds.setdefault(number, _Round(median)).results[index] = (afs, value)
            self.next_round = max(self.next_round, number + 1)

    def adopt(self, config: Mapping[str, Any], provenance: Provenance | None) -> None:
        """Treat ``config`` as asked and not yet told.

        Args:
            config: the configuration.
            provenance: what the engine wrote when it asked.
        """
        index = self.cands.locate(config)
        if index is None or self.visited[index]:
            return
        extra = (provenance.model_extra if provenance else None) or {}
        self.pending[index] = Pick(
            index,
            (provenance.proposer if provenance else None) or "model",
            list(extra.get("acquisitions") or []),
            extra.get("round"),
        )

    # -- ask --------------------------------------------------------------------------------------
    def next_pick(self) -> Pick:
        """The next candidate: queued, of the initial design, random, or of a new model round."""
        self.finalise_rounds()
        while self.queue:
            pick = self.queue.popleft()
            if not self.visited[pick.index] and pick.index not in self.pending:
                return pick
        n_valid = len(self.values)
        initial_pending = sum(p.proposer == "initial" for p in self.pending.values())
        if n_valid + initial_pending < self.engine.n_initial:
            return Pick(self.initial_index(), "initial")
        if n_valid < 2:
            return Pick(self.random_free(), "random")
        self.model_round()
        return self.queue.popleft()

    def initial_index(self) -> int:
        """The next free point of the initial design (a random free one when the design is used up)."""
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
            fill = (
                done.median_before
                if done.median_before is not None
                else (float(np.median(self.values)) if self.values else None)
            )
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
            points = [i for i, v in self.initial if v is not None] or self.gp.indices[: self.engine.n_initial]
            gp = CandidateGP(self.cands.units, self.engine.kernel, self.engine.lengthscale)
            for i in points:
                gp.add(i, 0.0)
            rest = np.ones(len(self.cands), dtype=bool)
            rest[points] = False
            self._initial_variance = float(np.mean(1.0 - gp._explained[rest])) if rest.any() else 0.0
        return self._initial_variance

    def exploration(self, std_z: np.ndarray, free: np.ndarray) -> float:
        """The exploration factor of the next round (the engine's constant, or the contextual variance).

        Args:
            std_z: the standardised posterior standard deviation of every candidate.
            free: which candidates are free.
        """
        if self.engine.exploration != "cv":
            return float(self.engine.exploration)
        initial = [v for _, v in self.initial if v is not None] or self.values[: self.engine.n_initial]
        return contextual_variance(
            float(np.mean(std_z[free] ** 2)), self.initial_variance(), float(np.mean(initial)), float(min(self.values))
        )

    def likely_valid(self, free: np.ndarray) -> np.ndarray:
        """The free candidates the validity model predicts to succeed (all free ones before any failure).

        Args:
            free: which candidates are free.
        """
        if not self.engine.avoid_failures or len(self.values) == self.told:
            return free
        validity, _ = self.validity.posterior()
        likely = free & (validity >= VALIDITY_THRESHOLD)
        return likely if likely.any() else free

    def model_round(self) -> None:
        """Queue one pick per active acquisition function of the portfolio."""
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
        self.queue.extend(Pick(i, "model", afs, number) for i, afs in picks.items())
        log.debug("round %d: exploration %.4g, picks %s", number, lam, picks)
