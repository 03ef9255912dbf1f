"""GPTuneBand's sampler: MLA over the (task, bracket) pairs of one pass and stage, refitted once per round.

The engine (:class:`raytuner.engines.GPTuneBand`) builds one sampler per
(pass, sampling stage) and folds into it the evaluations of the LCM-tasks it
covers, each task lifted by the bracket's level (:data:`LEVEL`); the sampler
refits its LCM when the least-sampled LCM-task gains a sample, not after
every evaluation.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from raytuner.engines.bandit import BanditStructure
from raytuner.engines.mla import MLA
from raytuner.engines.multiobjective import MultiObjectiveMLA
from raytuner.engines.sharing import MIN_OWN_SAMPLES, OWN_DESIGN
from raytuner.models import FittedLCM, LCMOptions
from raytuner.models.persistence import model_tasks
from raytuner.problem.records import FunctionEvaluation, Provenance, SurrogateModelRecord, task_key
from raytuner.problem.space import ProblemSpace

__all__ = ["LEVEL", "SOURCE_PROPOSALS", "LevelSampler", "MultiObjectiveLevelSampler", "lift_sources", "sources_for"]

log = logging.getLogger(__name__)

#: The extra task parameter that tells the LCM-tasks of one task apart (the bracket's fidelity index).
LEVEL = "gptuneband_level"
#: How GPTuneBand's samples use source records (its ``source_proposals`` option): the LCM with them and the one
#: without them take turns, or the LCM with them chooses every sample.
SOURCE_PROPOSALS = ("alternate", "every")


def lift_sources(records: Sequence[FunctionEvaluation], structure: BanditStructure) -> list[FunctionEvaluation]:
    """The successful source records at the :data:`LEVEL` of their fidelity, without their provenance.

    A fidelity names a level of ``structure`` when it is one of its brackets'
    (a bracket number of another run's structure may not); a record without
    one is at ``b_max``, as GPTune's are; the others are left out, with a warning.

    Args:
        records: the source evaluations.
        structure: the engine's bandit structure.
    """
    fidelities = [structure.fidelity(j) for j in range(structure.s_max + 1)]
    ok = [r for r in records if r.status == "ok"]
    lifted = []
    for record in ok:
        fidelity = record.raytuner.fidelity if record.raytuner is not None else None
        level = 0 if fidelity is None else next((j for j, b in enumerate(fidelities) if b == fidelity), None)
        if level is not None:
            lifted.append(
                record.model_copy(update={"task_parameter": {**record.task_parameter, LEVEL: level}, "raytuner": None})
            )
    if len(lifted) < len(ok):
        log.warning(
            "GPTuneBand: %d of %d source records are at fidelities of no bracket; left out",
            len(ok) - len(lifted),
            len(ok),
        )
    return lifted


def sources_for(
    sources: Sequence[FunctionEvaluation], tasks: Sequence[Mapping[str, Any]], lowest: int
) -> list[FunctionEvaluation]:
    """The lifted sources a sampler takes: the engine's own tasks only at the levels it models (``>= lowest``).

    Args:
        sources: the lifted source records (:func:`lift_sources`).
        tasks: the engine's tasks.
        lowest: the lowest level the sampler's LCM holds.
    """
    own = {task_key(t) for t in tasks}
    return [
        r
        for r in sources
        if r.task_parameter[LEVEL] >= lowest
        or task_key({k: v for k, v in r.task_parameter.items() if k != LEVEL}) not in own
    ]


class LevelSampler(MLA):
    """MLA over LCM-tasks, refitting once per sampling round of the current pass.

    Args:
        level_problem: The engine's problem with the :data:`LEVEL` task parameter.
        tasks: The engine's tasks.
        structure: The bandit structure.
        pass_index: The pass (0-based).
        stage: The sampling stage: the lowest bracket still sampling.
        every_level: Keep every fidelity level in the LCM (``model="levels"``), not only the brackets sampling.
        seed: The engine's seed.
        plain: This is the twin without the engine's sources (``source_proposals="alternate"``): its
            models are stored apart (:meth:`sampler`).
        known: The uids of the run's records and sources: a model of an earlier pass or stage fitted on
            them alone may warm-start this sampler (:meth:`warm_rows`), none of another run.
        quotas: The samples of each bracket in this pass (:meth:`BandPlan.quotas
            <raytuner.engines.gptuneband.plan.BandPlan.quotas>`).
        **options: MLA's options.
    """

    name = "gptuneband"
    #: GPTuneBand's model keeps signed task weights (``python -m benchmarks band`` compares them).
    default_options = LCMOptions(task_weights="signed")
    #: A lower bracket's sample takes its task's own model's turns where that model predicts the task
    #: (``python -m benchmarks band``'s Table 1); a ``b_max`` sample's own model takes every one (:meth:`_own_turn`).
    OWN_TURN_RHO = MLA.PREDICTIVE

    def __init__(
        self,
        level_problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]],
        structure: BanditStructure,
        pass_index: int,
        stage: int,
        every_level: bool,
        seed: int | None,
        *,
        plain: bool = False,
        known: Collection[str] = (),
        quotas: Sequence[int],
        **options: Any,
    ) -> None:
        self.pass_index = pass_index
        self.plain = plain
        self.known = frozenset(known)
        self.stage = stage
        self.every_level = every_level
        lowest = 0 if self.every_level else stage
        self.fidelities = [structure.fidelity(j) for j in range(structure.s_max + 1)]
        self.lcm_tasks = [(i, j) for i in range(len(tasks)) for j in range(lowest, structure.s_max + 1)]
        lifted = [{**tasks[i], LEVEL: j} for i, j in self.lcm_tasks]
        self._quota = [quotas[j] for _, j in self.lcm_tasks]
        self._sampled = [0] * len(self.lcm_tasks)
        self._round: int | None = None
        self._horizon = 0
        super().__init__(level_problem, lifted, seed=seed, **options)  # folds the sources (no provenance)

    def fit_horizon(self) -> int:
        return self._horizon

    def levels(self) -> dict[str, Any]:
        """The :data:`LEVEL` input and the fidelity of each level, kept with this sampler's models."""
        return {"name": LEVEL, "fidelities": list(self.fidelities)}

    def sampler(self) -> dict[str, int | bool]:
        return {"pass": self.pass_index + 1, "stage": self.stage, **({"plain": True} if self.plain else {})}

    def warm_rows(self, record: SurrogateModelRecord, sampler: Mapping[str, Any] | None) -> list[int] | None:
        # a model of an earlier (pass, stage) of this run (fitted on its records alone), with or without the sources
        # as this one; an LCM-task it lacks (a level of a lower stage) takes the same task's nearest level in it
        if not isinstance(sampler, Mapping) or bool(sampler.get("plain")) != self.plain:
            return None
        earlier = (sampler.get("pass"), sampler.get("stage"))
        if (
            not all(isinstance(v, int) for v in earlier)
            or not earlier < (self.pass_index + 1, self.stage)
            or not self.known.issuperset(record.function_evaluations)
        ):
            return None
        names = self.problem.input_space.names
        at = names.index(LEVEL)
        levels: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
        for k, values in enumerate(model_tasks(record)):
            if len(values) != len(names) or not isinstance(values[at], int) or isinstance(values[at], bool):
                return None  # a model of other task parameters
            levels.setdefault(tuple(v for n, v in enumerate(values) if n != at), []).append((values[at], k))
        rows = []
        for values in self._task_values():
            found = levels.get(tuple(v for n, v in enumerate(values) if n != at))
            if not found:
                return None
            rows.append(min(found, key=lambda lk: (abs(lk[0] - values[at]), lk[0]))[1])
        return rows

    def start_sources(self, index: int) -> list[FunctionEvaluation]:
        """The source records at ``b_max`` for an LCM-task at ``b_max`` (bracket 0); none for the others.

        Args:
            index: The LCM-task's position.
        """
        if self.lcm_tasks[index][1] != 0:
            return []
        return [r for r in super().start_sources(index) if r.task_parameter[LEVEL] == 0]

    def scored_task(self, index: int) -> int:
        if not self.every_level:
            return index
        i, _ = self.lcm_tasks[index]
        return self.lcm_tasks.index((i, 0))  # the prediction at b_max

    def own_tasks(self, index: int) -> list[int]:
        """Task ``index``'s own levels; for a ``b_max`` sample scored at ``b_max``, its ``b_max`` evaluations alone.

        A configuration that starts slowly ranks low at the low fidelities and
        well at ``b_max`` (a late bloomer): a model that learns from its low
        fidelities too would steer the task's full-fidelity search away from it.

        Args:
            index: The LCM-task a sample is sought for.
        """
        i, j = self.lcm_tasks[index]
        if j == 0:
            return [index]
        return [k for k, (task, _) in enumerate(self.lcm_tasks) if task == i]

    def _explores(self, index: int, mine: FittedLCM, target: int) -> bool:
        """Whether task ``index``'s next sample explores: a ``b_max`` sample (bracket 0) while its task holds fewer
        than :data:`~raytuner.engines.sharing.OWN_DESIGN` evaluations at ``b_max``.

        The promotions that make a task's first ``b_max`` evaluations lie where the
        low fidelities and the other tasks rate configurations well: the task's
        own ``b_max`` search starts from them as single-task BO's starts from its
        initial design only once it has looked elsewhere too.
        """
        return self.lcm_tasks[index][1] == 0 and int(np.sum(mine.task == target)) < OWN_DESIGN

    def _own_turn(self, index: int, mine: FittedLCM, target: int) -> bool:
        """Whether task ``index``'s next sample is its own model's: every ``b_max`` sample (bracket 0) once the
        task's own model (of its levels alone) holds :data:`~raytuner.engines.sharing.MIN_OWN_SAMPLES`
        evaluations at ``b_max``; a lower bracket's on MLA's turns where that model predicts the task
        (:attr:`OWN_TURN_RHO`).

        Bracket 0 is the task's stream of full-fidelity samples: chosen by the
        task's own evaluations alone, it is single-task BO's search, which reaches
        a best region that the other tasks and the low fidelities rate badly
        (a corner, a late bloomer); the lower brackets, most of a pass's
        samples, keep what the shared model teaches.

        Args:
            index: The LCM-task a sample is sought for.
            mine: The task's own model (:meth:`own_model`).
            target: The scored LCM-task's position in ``mine``.
        """
        if self.lcm_tasks[index][1] == 0:
            return int(np.sum(mine.task == target)) >= MIN_OWN_SAMPLES
        return super()._own_turn(index, mine, target)

    def fold(self, record: FunctionEvaluation) -> None:
        """Fold in an evaluation of one of its LCM-tasks (lifted to its :data:`LEVEL`) that the band has checked.

        Args:
            record: The evaluation, told to the band or replayed by it.
        """
        self._fold(record)

    def _fold(self, record: FunctionEvaluation) -> None:
        before = len(self._records)
        super()._fold(record)
        if len(self._records) == before:
            return
        prov = record.raytuner or Provenance()
        k = self.task_index(record.task_parameter)
        if prov.rung == 0 and prov.pass_ == self.pass_index + 1:
            self._sampled[k] += 1
        open_counts = [c for c, q in zip(self._sampled, self._quota) if c < q]
        current = min(open_counts) if open_counts else -1
        if current != self._round:
            self._round, self._horizon = current, len(self._records)
        if not any(self._sampled):
            # nothing of this pass sampled yet: every record so far is earlier data (earlier passes, the
            # sources), all of it the first round's model's; the horizon stayed at the first record before
            self._horizon = len(self._records)


class MultiObjectiveLevelSampler(LevelSampler, MultiObjectiveMLA):
    """:class:`LevelSampler` with one LCM per optimised or bounded output, choosing as MultiObjectiveMLA does.

    Every output's model (an :class:`~raytuner.engines.multiobjective.OutputModel`
    of this sampler) is refitted at the sampler's rounds, stored as this sampler's
    models, and with ``model="levels"`` scores a bracket's samples by the front at
    ``b_max``. It takes :class:`LevelSampler`'s arguments (MLA's options without ``objective``).
    """
