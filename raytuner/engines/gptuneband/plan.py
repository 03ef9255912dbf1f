"""Where a GPTuneBand run stands: each task's place in the passes, what is in flight, and each task's budget.

:class:`BandPlan` is GPTuneBand's bookkeeping without a model: the
successive-halving runs (:class:`~raytuner.engines.gptuneband.brackets.Brackets`),
the samples and promotions in flight, and the normalised cost told per
task. From these alone it answers which pass and sampling stage the run is
in, each task's next step and its cost, and whether a task is finished:
every pass of its plan complete, or (with a ``budget``) its next step does
not fit in what is left of its budget and nothing of it is in flight. It is
a fold over the told records, like the engine, so a replayed run stands
where the original stood.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.engines.bandit import BanditStructure
    >>> from raytuner.engines.gptuneband.options import GPTuneBandOptions
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> structure = BanditStructure.hyperband(1, 4, 2)
    >>> plan = BandPlan(structure, ProblemSpace.parse(DEMO_PROBLEM).objective(), 2, GPTuneBandOptions(budget=1.0))
    >>> plan.next_step(0, 0)          # bracket 0's first sample at b_max costs 1
    Step(kind='sample', cost=1.0, bracket=0, promotion=None)
    >>> plan.finished(0), plan.passes      # a budget without passes: as many passes as it pays for
    (False, None)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from scipy.stats import spearmanr

from raytuner.engines.bandit import BanditStructure, FidelityMode
from raytuner.engines.gptuneband.brackets import Brackets, InFlight, RunKey
from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.problem.space import Objective, ProblemSpace

if TYPE_CHECKING:
    from raytuner.engines.gptuneband.options import GPTuneBandOptions

__all__ = ["AGREEMENT", "BandPlan", "Step"]

log = logging.getLogger(__name__)

#: Slack in budget comparisons (normalised costs are sums of fractions).
EPSILON = 1e-9
#: With ``later_passes="agreeing"``, a bracket samples in a later pass when its agreement is at least this.
AGREEMENT = 0.7
#: The fewest (evaluation, promotion) pairs of one task at one fidelity that give a rank correlation.
MIN_PAIRS = 3


@dataclass(frozen=True)
class Step:
    """A task's next step: a new sample of ``bracket``, or the promotion ``(run key, rung, parent uid)``."""

    kind: Literal["sample", "promotion"]
    cost: float
    bracket: int
    promotion: tuple[RunKey, int, str] | None = None


def rank_correlation(pairs: list[tuple[float, float]]) -> float | None:
    """Spearman's rank correlation of ``pairs`` (``None`` where either side is constant).

    Args:
        pairs: ``(x, y)`` values.

    >>> rank_correlation([(1.0, 10.0), (2.0, 30.0), (3.0, 20.0)])
    0.5
    >>> rank_correlation([(1.0, 5.0), (2.0, 5.0), (3.0, 5.0)]) is None
    True
    """
    x, y = (np.array(side, dtype=float) for side in zip(*pairs))
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(spearmanr(x, y).statistic)


class BandPlan:
    """GPTuneBand's plan state; see the module docstring.

    Args:
        structure: The bandit structure.
        objective: The objective that ranks a rung.
        tasks: How many tasks.
        options: The engine's options: its ``passes`` (``None``: one without a budget, unlimited with one),
            ``budget`` (normalised cost per task, ``b / b_max`` per evaluation; ``None``: the passes decide),
            ``fidelity_mode`` (what a promotion costs) and ``later_passes`` (with several objectives, every
            bracket).
        problem: With several objectives or output constraints: rank a rung by all of them (see
            :class:`~raytuner.engines.gptuneband.brackets.Brackets`).
    """

    def __init__(
        self,
        structure: BanditStructure,
        objective: Objective,
        tasks: int,
        options: GPTuneBandOptions,
        problem: ProblemSpace | None = None,
    ) -> None:
        passes, budget = options.passes, options.budget
        self.later_passes = options.later_passes if problem is None else "all"
        self._quotas: dict[int, tuple[int, ...]] = {}
        self.structure = structure
        self.tasks = tasks
        self.passes = passes if passes is not None or budget is not None else 1
        self.budget = None if budget is None else float(budget)
        self.mode: FidelityMode = options.fidelity_mode
        self.brackets = Brackets(structure, objective, problem, quota=lambda p, j: self.quotas(p)[j])
        self.in_flight = InFlight()
        self.told_cost = [0.0] * tasks
        self._complete_parts = [0] * tasks  # per task, passes known complete (a complete part stays complete)

    # -- folds -----------------------------------------------------------------------------------
    def asked(self, task: int, config: Mapping[str, Any], provenance: Provenance) -> None:
        """Count a suggestion (a sample at rung 0, or a promotion naming its parent) as in flight.

        Args:
            task: The task's index.
            config: The configuration handed out.
            provenance: Its place in the plan (pass, bracket, rung, parent) and cost.
        """
        p, s = (provenance.pass_ or 1) - 1, provenance.bracket
        assert s is not None and provenance.rung is not None
        if provenance.rung > 0 and provenance.parent is not None:
            self.brackets.run((p, task, s)).promoting.add(provenance.parent)
        self.in_flight.add(task, config, provenance)

    def place(self, task: int, record: FunctionEvaluation) -> FunctionEvaluation:
        """``record`` placed in the plan: matched to the one suggestion in flight it answers, or refused.

        A record with a bracket and rung must answer a suggestion in flight
        at that place with its task and configuration (a second tell of one
        suggestion, or a changed configuration, is refused). A record without
        them (created without the suggestion's provenance) is matched by task
        and configuration (and fidelity, when it has one), with a warning.

        Args:
            task: The task's index.
            record: The checked record, of that task.

        Raises:
            InvalidInputError: It answers no suggestion in flight, or several at different places.
        """
        prov = record.raytuner or Provenance()
        placed = prov.bracket is not None and prov.rung is not None
        found = self.in_flight.matches(task, record.tuning_parameter, None if placed else prov.fidelity)
        if placed:
            place = (prov.pass_ or 1, prov.bracket, prov.rung)
            found = [p for p in found if (p.pass_ or 1, p.bracket, p.rung) == place]
        where = f"task {dict(record.task_parameter)} and configuration {dict(record.tuning_parameter)}"
        if len({(p.pass_, p.bracket, p.rung) for p in found}) != 1:
            places = ", ".join(f"pass {p.pass_} bracket {p.bracket} rung {p.rung}" for p in found) or "none"
            at = (
                f" at pass {prov.pass_ or 1} bracket {prov.bracket} rung {prov.rung}"
                if placed
                else " has no bracket and rung, and it"
            )
            raise InvalidInputError(
                "provenance",
                f"the record of {where}{at} matches {len(found)} GPTuneBand suggestions in flight "
                f"({places}): tell each suggestion once, as it was asked (engine.tell(suggestion, outputs)), or "
                "create the record with provenance=suggestion.provenance",
            )
        asked = found[0].model_dump(by_alias=True, exclude_none=True)
        own = prov.model_dump(by_alias=True, exclude_none=True)
        if placed:  # the record's own fidelity and cost (a trial that ran further) stand
            return record.model_copy(update={"raytuner": Provenance.model_validate({**asked, **own})})
        log.warning(
            "a record of %s came without its suggestion's provenance; matched to pass %s bracket %s rung %s",
            where,
            found[0].pass_,
            found[0].bracket,
            found[0].rung,
        )
        placed_prov = Provenance.model_validate(
            {**own, **asked, "status": prov.status, "failure_message": prov.failure_message}
        )
        return record.model_copy(update={"raytuner": placed_prov})

    def told(self, task: int, record: FunctionEvaluation) -> None:
        """Fold in a told record that has its place in the plan.

        Args:
            task: The task's index.
            record: The record, with ``raytuner.bracket``, ``rung`` and ``pass``.
        """
        prov = record.raytuner
        assert prov is not None and prov.bracket is not None and prov.rung is not None
        p = (prov.pass_ or 1) - 1
        self.brackets.add(record, (p, task, prov.bracket))
        self.in_flight.remove(task, record)
        self.told_cost[task] += prov.cost or 0.0

    # -- where each task stands -------------------------------------------------------------------
    def samples_given(self, i: int, j: int) -> int:
        """New samples of task ``i``'s bracket ``j`` in every pass so far, told and in flight.

        Args:
            i: The task's index.
            j: The bracket.
        """
        told = sum(self.brackets.sampled(key) for key in self.brackets.runs if key[1:] == (i, j))
        return told + sum(1 for _, t, s, _ in self.in_flight.places() if (t, s) == (i, j))

    def sampled(self, p: int, i: int, j: int) -> int:
        """Rung-0 samples told for pass ``p``, task ``i``, bracket ``j``.

        Args:
            p: The pass (0-based).
            i: The task's index.
            j: The bracket.
        """
        return self.brackets.sampled((p, i, j))

    def _part_complete(self, i: int, p: int) -> bool:
        if self.sampled(p, i, 0) < self.structure.samples(0):
            return False  # pass p has not begun for task i (nor chosen its brackets: see quotas)
        s_max, quotas = self.structure.s_max, self.quotas(p)
        return all(self.sampled(p, i, j) >= quotas[j] for j in range(s_max + 1)) and all(
            self.brackets.complete(self.brackets.run((p, i, j))) for j in range(s_max + 1)
        )

    def quotas(self, p: int) -> tuple[int, ...]:
        """The samples of each bracket in pass ``p``: Hyperband's ``N(j)``, or with ``later_passes="agreeing"``,
        after the first pass, none in a bracket whose :meth:`agreement` is under :data:`AGREEMENT` (bracket 0
        samples in every pass).

        Decided once per pass from the evaluations of the passes before it. Those are all told when pass ``p``
        begins (its samples wait until every open task ends pass ``p - 1``), and the plan asks for its brackets
        only then, so a replayed run decides as the original did.

        Args:
            p: The pass (0-based).
        """
        full = tuple(self.structure.samples(j) for j in range(self.structure.s_max + 1))
        if p == 0 or self.later_passes == "all":
            return full
        if p not in self._quotas:
            agreement = self.agreement(p)
            self._quotas[p] = tuple(n if j == 0 or agreement[j] >= AGREEMENT else 0 for j, n in enumerate(full))
            log.info(
                "GPTuneBand pass %d samples brackets %s (each bracket's lowest fidelity ranks as b_max does: %s)",
                p + 1,
                [j for j, n in enumerate(self._quotas[p]) if n],
                [round(a, 3) for a in agreement],
            )
        return self._quotas[p]

    def agreement(self, p: int) -> list[float]:
        """Per bracket, how well evaluations at its lowest fidelity rank as they do at ``b_max``, from passes before ``p``.

        Every told promotion and the evaluation it promotes are a pair of values of one configuration at two
        neighbouring fidelities. Per fidelity level ``k >= 1`` (the promoted evaluation's), the rank correlation
        (Spearman's) of a task's pairs, averaged over the tasks with at least :data:`MIN_PAIRS` of them weighted
        by their pairs (1 where none has as many); a bracket's agreement is the product of these over the levels
        from its own down to ``b_max``, each at least 0; bracket 0's is 1. Promotions are the best of their
        rung, so it measures how well a fidelity ranks good configurations, the ones later passes sample.

        Args:
            p: The pass (0-based): only the passes before it count.

        >>> from raytuner.engines.bandit import BanditStructure
        >>> from raytuner.problem.space import ProblemSpace
        >>> from raytuner.test_problems import DEMO_PROBLEM
        >>> from raytuner.engines.gptuneband.options import GPTuneBandOptions
        >>> structure, objective = BanditStructure.hyperband(1, 4, 2), ProblemSpace.parse(DEMO_PROBLEM).objective()
        >>> plan = BandPlan(structure, objective, 1, GPTuneBandOptions())
        >>> plan.agreement(1)   # no promotions yet: every fidelity counts as agreeing
        [1.0, 1.0, 1.0]
        """
        name = self.brackets.objective.name
        pairs: dict[tuple[int, int], list[tuple[float, float]]] = {}
        for uid, record in self.brackets.by_uid.items():
            prov = record.raytuner
            if prov is None or prov.parent is None or not prov.rung or prov.bracket is None:
                continue
            key = self.brackets.key_of(uid)
            parent = self.brackets.by_uid.get(prov.parent)
            if key[0] >= p or parent is None:
                continue
            before, after = parent.value(name), record.value(name)
            if before is not None and after is not None:
                pairs.setdefault((prov.bracket - prov.rung + 1, key[1]), []).append((before, after))
        agreement = [1.0]
        for k in range(1, self.structure.s_max + 1):
            weighted = [
                (len(values), rank_correlation(values))
                for (level, _), values in pairs.items()
                if level == k and len(values) >= MIN_PAIRS
            ]
            known = [(n, r) for n, r in weighted if r is not None]
            rho = sum(n * r for n, r in known) / sum(n for n, _ in known) if known else 1.0
            agreement.append(agreement[-1] * max(rho, 0.0))
        return agreement

    def frontier(self, i: int) -> int:
        """The first pass whose part for task ``i`` is not complete (``passes`` when all are).

        Args:
            i: The task's index.
        """
        p = self._complete_parts[i]
        while (self.passes is None or p < self.passes) and self._part_complete(i, p):
            p += 1
        self._complete_parts[i] = p
        return p

    def spent(self, i: int) -> float:
        """Normalised cost of task ``i`` told and in flight.

        Args:
            i: The task's index.
        """
        return self.told_cost[i] + self.in_flight.cost(i)

    def next_step(self, i: int, p: int) -> Step | None:
        """Task ``i``'s next step in pass ``p``: its first ready promotion, else its least-sampled bracket.

        Args:
            i: The task's index.
            p: The pass.
        """
        for key, rung, parent in self.brackets.promotions(i):
            if key[0] == p:
                level = key[2] - rung
                source = self.brackets.by_uid[parent]
                previous = (source.raytuner.fidelity if source.raytuner else None) or self.structure.fidelity(level + 1)
                cost = self.structure.cost(self.structure.fidelity(level), previous, self.mode)
                return Step("promotion", cost, key[2], (key, rung, parent))
        choices = [
            (self.sampled(p, i, j) + len(self.in_flight.samples(p, i, j)), j) for j in range(self.structure.s_max + 1)
        ]
        quotas = self.quotas(p)
        open_choices = [(used, j) for used, j in choices if used < quotas[j]]
        if not open_choices:
            return None
        j = min(open_choices)[1]
        return Step("sample", self.structure.cost(self.structure.fidelity(j)), j)

    def affordable(self, i: int, step: Step) -> bool:
        """Whether ``step`` fits in what is left of task ``i``'s budget (always, without one).

        Args:
            i: The task's index.
            step: The step.
        """
        return self.budget is None or self.spent(i) + step.cost <= self.budget + EPSILON

    def finished(self, i: int) -> bool:
        """Whether task ``i`` is done: every pass complete, or its next step does not fit its budget.

        Args:
            i: The task's index.
        """
        p = self.frontier(i)
        if self.passes is not None and p >= self.passes:
            return True
        if self.budget is None or self.in_flight.count(i):
            return False
        step = self.next_step(i, p)
        return step is None or not self.affordable(i, step)

    def open_tasks(self) -> list[int]:
        """The tasks not finished."""
        return [i for i in range(self.tasks) if not self.finished(i)]

    def current_pass(self) -> int:
        """The pass in progress: the lowest frontier of an open task (``passes`` or more when all are done)."""
        frontiers = [self.frontier(i) for i in self.open_tasks()]
        if frontiers:
            return min(frontiers)
        return max([self.frontier(i) for i in range(self.tasks)] + [self.passes or 0])

    def stage(self, p: int) -> int:
        """The sampling stage of pass ``p``: the lowest bracket an open task has not sampled fully.

        Args:
            p: The pass.
        """
        open_tasks, quotas = self.open_tasks(), self.quotas(p)
        for j in range(self.structure.s_max + 1):
            if any(self.sampled(p, i, j) < quotas[j] for i in open_tasks):
                return j
        return self.structure.s_max + 1

    # -- what to ask next ---------------------------------------------------------------------------
    def ready_promotions(self, only: int | None) -> list[Step]:
        """The promotions to hand out now, the task that spent least first (so tasks advance evenly).

        Only open tasks' promotions that fit their budget count.

        Args:
            only: A task index to restrict them to (``None``: every task).
        """
        p = self.current_pass()
        steps = []
        for i in self.open_tasks():
            if only is None or i == only:
                step = self.next_step(i, p)
                if step is not None and step.kind == "promotion" and self.affordable(i, step):
                    steps.append((self.spent(i), i, step))
        return [step for _, _, step in sorted(steps, key=lambda x: (x[0], x[1]))]

    def next_sample(self, only: int | None) -> tuple[int, int, int] | None:
        """``(pass, task, bracket)`` of the next sample: the open task that spent least, at its least-sampled bracket.

        Args:
            only: A task index to restrict it to (``None``: every task).
        """
        p = self.current_pass()
        choices = []
        for i in self.open_tasks():
            if only is not None and i != only:
                continue
            step = self.next_step(i, p)
            if step is None or step.kind != "sample" or not self.affordable(i, step):
                continue
            choices.append((round(self.spent(i), 9), i, step.bracket))
        if not choices:
            return None
        _, i, j = min(choices)
        return p, i, j
