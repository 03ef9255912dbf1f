"""Successive-halving bookkeeping of GPTuneBand: which evaluations each rung of each bracket holds.

A *run* is one (pass, task, bracket): the uids told at each rung, the
promotions asked and not told, and those told. :class:`Brackets` keeps every
run and answers what GPTuneBand asks of them: how many evaluations a rung
holds when complete, which evaluations are ready to be promoted, whether a
run is complete and whether an evaluation is retired. It is a fold over the
told records, like the engine.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation, Provenance
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.engines.bandit import BanditStructure
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> brackets = Brackets(BanditStructure.hyperband(1, 4, 2), ProblemSpace.parse(DEMO_PROBLEM).objective())
    >>> for x in (0.1, 0.5, 0.9):      # bracket 1 samples N(1) = 2 configurations at B(1) = 2
    ...     record = FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"y": x},
    ...                                        provenance=Provenance(bracket=1, rung=0, pass_=1))
    ...     if x < 0.9:
    ...         brackets.add(record, (0, 0, 1))
    >>> [(key, rung) for key, rung, _ in brackets.promotions(None)]
    [((0, 0, 1), 1)]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from raytuner.engines.bandit import BanditStructure
from raytuner.problem.pareto import nsga_order
from raytuner.problem.records import FunctionEvaluation, Provenance, task_key
from raytuner.problem.space import Objective, ProblemSpace

__all__ = ["Brackets", "InFlight", "Run", "RunKey"]

RunKey = tuple[int, int, int]  # (pass, task index, bracket)


@dataclass
class Run:
    """Successive halving of one (pass, task, bracket): told uids per rung and promotions in flight.

    Args:
        bracket: The bracket ``s``; its rung 0 is at fidelity ``B(s)``.
        samples: How many samples its rung 0 holds when complete (``N(s)``, or none where a later pass
            leaves the bracket out).
        rungs: The uids told at each rung, in log order.
        promoting: Parent uids whose promotion was asked and not told.
        promoted: Parent uids whose promotion was told.
        ranked: Per rung, how many uids :meth:`Brackets.successes` last ranked and the successful ones best
            first (valid while the rung holds that many: a rung only grows).
    """

    bracket: int
    samples: int
    rungs: list[list[str]] = field(default_factory=list)
    promoting: set[str] = field(default_factory=set)
    promoted: set[str] = field(default_factory=set)
    ranked: dict[int, tuple[int, list[str]]] = field(default_factory=dict, repr=False, compare=False)

    def told(self, rung: int) -> list[str]:
        """The uids told at ``rung`` (a list the caller may append to).

        Args:
            rung: The rung, 0 at the bracket's own fidelity.
        """
        while len(self.rungs) <= rung:
            self.rungs.append([])
        return self.rungs[rung]


class Brackets:
    """Every run of a GPTuneBand engine; see the module docstring.

    Args:
        structure: The bandit structure (fidelities, ``eta``).
        objective: The objective that ranks evaluations within a rung.
        problem: With several objectives or output constraints: rank a rung by them instead, as NSGA-II
            does (:func:`~raytuner.problem.pareto.nsga_order`: feasible first, non-dominated fronts, crowding).
        quota: The samples of bracket ``j`` in pass ``p``, ``quota(p, j)`` (default: ``N(j)`` in every pass).
    """

    def __init__(
        self,
        structure: BanditStructure,
        objective: Objective,
        problem: ProblemSpace | None = None,
        quota: Callable[[int, int], int] | None = None,
    ) -> None:
        self.structure = structure
        self.quota = quota if quota is not None else (lambda p, j: structure.samples(j))
        self.objective = objective
        self.problem = problem
        self.runs: dict[RunKey, Run] = {}
        self.by_uid: dict[str, FunctionEvaluation] = {}
        self._keys: dict[str, RunKey] = {}

    def run(self, key: RunKey) -> Run:
        """The run of ``key`` (created empty on first use).

        Args:
            key: ``(pass, task index, bracket)``.
        """
        if key not in self.runs:
            self.runs[key] = Run(bracket=key[2], samples=self.quota(key[0], key[2]))
        return self.runs[key]

    def key_of(self, uid: str) -> RunKey:
        """The ``(pass, task index, bracket)`` of the told evaluation ``uid``.

        Args:
            uid: A uid told to :meth:`add`.
        """
        return self._keys[uid]

    def add(self, record: FunctionEvaluation, key: RunKey) -> None:
        """Fold in a told evaluation at its rung (its provenance has a rung; a promotion names its parent).

        Args:
            record: The evaluation, with ``raytuner.rung`` (and ``raytuner.parent`` for a promotion).
            key: Its ``(pass, task index, bracket)``.
        """
        prov = record.raytuner
        assert prov is not None and prov.rung is not None
        self.by_uid[record.uid] = record
        self._keys[record.uid] = key
        run = self.run(key)
        run.told(prov.rung).append(record.uid)
        if prov.rung > 0 and prov.parent is not None:
            run.promoting.discard(prov.parent)
            run.promoted.add(prov.parent)

    def rung_size(self, run: Run, rung: int) -> int | None:
        """How many evaluations rung ``rung`` of ``run`` holds when complete (``None``: not known yet).

        Args:
            run: The run.
            rung: The rung.
        """
        if rung == 0:
            return run.samples
        below = self.rung_size(run, rung - 1)
        if below is None or len(run.told(rung - 1)) < below:
            return None
        return min(self.structure.keep(below), len(self.successes(run, rung - 1)))

    def successes(self, run: Run, rung: int) -> list[str]:
        """The successful uids told at ``rung`` of ``run``, best first (ties in log order).

        The ranking is kept until the rung grows: GPTuneBand asks it many times per suggestion.

        Args:
            run: The run.
            rung: The rung.
        """
        uids = run.told(rung)
        count, ranked = run.ranked.get(rung, (-1, []))
        if count == len(uids):
            return ranked
        if self.problem is not None:
            ranked = [uids[n] for n in nsga_order(self.problem, [self.by_uid[u] for u in uids])]
        else:
            sign = self.objective.sign()
            scored = [
                (sign * v, n, u)
                for n, u in enumerate(uids)
                if (v := self.by_uid[u].value(self.objective.name)) is not None
            ]
            ranked = [u for _, _, u in sorted(scored)]
        run.ranked[rung] = (len(uids), ranked)
        return ranked

    def complete(self, run: Run) -> bool:
        """Whether every rung of ``run`` holds all it will hold.

        Args:
            run: The run.
        """
        for rung in range(run.bracket + 1):
            size = self.rung_size(run, rung)
            if size is None:
                return False
            if size == 0 or (len(run.told(rung)) >= size and rung == run.bracket):
                return True
            if len(run.told(rung)) < size:
                return False
        return True

    def sampled(self, key: RunKey) -> int:
        """How many rung-0 samples of ``key`` are told.

        Args:
            key: ``(pass, task index, bracket)``.
        """
        return len(self.run(key).told(0))

    def promotions(self, only: int | None) -> list[tuple[RunKey, int, str]]:
        """The promotions that can be asked now: ``(run key, rung promoted to, parent uid)``, in run order.

        Args:
            only: A task index to restrict them to (``None``: every task).
        """
        ready = []
        for key in sorted(self.runs):
            if only is not None and key[1] != only:
                continue
            run = self.runs[key]
            for rung in range(run.bracket):
                size = self.rung_size(run, rung)
                if size is None or len(run.told(rung)) < size:
                    break
                keep = self.rung_size(run, rung + 1) or 0
                for uid in self.successes(run, rung)[:keep]:
                    if uid not in run.promoting and uid not in run.promoted:
                        ready.append((key, rung + 1, uid))
        return ready

    def retired(self, uid: str) -> bool:
        """Whether evaluation ``uid`` will never be continued: at ``b_max``, failed, or lost its rung.

        Args:
            uid: The evaluation (an unknown uid is retired).
        """
        record = self.by_uid.get(uid)
        if record is None or record.raytuner is None:
            return True
        prov = record.raytuner
        rung = prov.rung
        assert rung is not None  # add() takes records with a rung only
        if rung == prov.bracket or record.value(self.objective.name) is None:
            return True
        run = self.run(self._keys[uid])
        size = self.rung_size(run, rung)
        if size is None or len(run.told(rung)) < size:
            return False
        keep = self.rung_size(run, rung + 1) or 0
        return uid not in self.successes(run, rung)[:keep]


class InFlight:
    """The suggestions asked and not told, with the provenance each was handed out with, in asking order.

    A told record is matched to its suggestion by its place in the plan
    (pass, bracket, rung); a record that lost its provenance on the way back
    can be matched by task and configuration (:meth:`matches`).

    >>> flight = InFlight()
    >>> flight.add(0, {"x": 0.5}, Provenance(bracket=1, rung=0, pass_=1, fidelity=2.0, cost=0.5))
    >>> [p.bracket for p in flight.matches(0, {"x": 0.5}, None)], flight.cost(0), flight.samples(0, 0, 1)
    ([1], 0.5, [{'x': 0.5}])
    """

    def __init__(self) -> None:
        self._asked: list[tuple[int, dict[str, Any], Provenance]] = []

    def add(self, task: int, config: Mapping[str, Any], provenance: Provenance) -> None:
        """Count a suggestion as in flight.

        Args:
            task: The task's index.
            config: The configuration handed out.
            provenance: What the engine wrote when it asked (pass, bracket, rung, cost).
        """
        self._asked.append((task, dict(config), provenance))

    def remove(self, task: int, record: FunctionEvaluation) -> None:
        """The suggestion ``record`` answers is no longer in flight (a record that answers none: no change).

        Args:
            task: The task's index.
            record: The told record, with its place in the plan.
        """
        prov = record.raytuner or Provenance()
        key = task_key(record.tuning_parameter)
        for n, (t, config, p) in enumerate(self._asked):
            if (
                t == task
                and (p.bracket, p.rung, p.pass_ or 1) == (prov.bracket, prov.rung, prov.pass_ or 1)
                and task_key(config) == key
            ):
                del self._asked[n]
                return

    def matches(self, task: int, config: Mapping[str, Any], fidelity: float | None) -> list[Provenance]:
        """The provenances in flight for this task and configuration (at ``fidelity`` when given).

        Args:
            task: The task's index.
            config: The configuration.
            fidelity: The fidelity the record says it ran at (``None``: any).
        """
        key = task_key(config)
        return [
            p
            for t, c, p in self._asked
            if t == task
            and task_key(c) == key
            and (fidelity is None or p.fidelity is None or abs(p.fidelity - fidelity) < 1e-9)
        ]

    def samples(self, p: int, task: int, bracket: int) -> list[dict[str, Any]]:
        """The configurations of new samples in flight for pass ``p`` (0-based), ``task`` and ``bracket``.

        Args:
            p: The pass.
            task: The task's index.
            bracket: The bracket.
        """
        return [
            c
            for t, c, q in self._asked
            if t == task and q.rung == 0 and q.bracket == bracket and (q.pass_ or 1) == p + 1
        ]

    def places(self) -> list[tuple[int, int, int, dict[str, Any]]]:
        """``(pass, task, bracket, config)`` of every new sample in flight, in asking order."""
        return [
            ((q.pass_ or 1) - 1, t, q.bracket, c) for t, c, q in self._asked if q.rung == 0 and q.bracket is not None
        ]

    def count(self, task: int | None = None) -> int:
        """How many suggestions are in flight (for ``task`` when given).

        Args:
            task: The task's index (``None``: every task).
        """
        return sum(1 for t, _, _ in self._asked if task is None or t == task)

    def cost(self, task: int) -> float:
        """The normalised cost in flight for a task.

        Args:
            task: The task's index.
        """
        return sum(p.cost or 0.0 for t, _, p in self._asked if t == task)
