"""GPTuneBand: multitask, multi-fidelity tuning (paper 004, Algorithm 4, multi-pass).

Every (task, bracket) pair is an *LCM-task*. In each pass the engine samples
configurations for the LCM-tasks with one LCM, as MLA does, except that an
LCM-task leaves the model once it holds its ``N(s)`` samples; a bracket whose
samples are complete runs successive halving (Algorithm 3): the best
``⌊|C|/η⌋`` evaluations of a rung are evaluated again at the next fidelity,
up to ``b_max``. Later passes sample on top of all earlier data, the
successive-halving evaluations included (an evaluation at fidelity ``B(j)``
is data of the LCM-task ``(task, j)``).

Two kinds of fidelity: ``"one_shot"`` (a promotion is a new evaluation at a
higher fidelity, as for an HPC code run on a finer grid) and ``"iterative"``
(a promotion continues training; its ``parent`` is the evaluation it
continues). Every suggestion carries its bracket, rung, pass, fidelity,
normalised cost (``b / b_max``, or the increment when iterative) and, for a
promotion, its parent's uid. The engine is a fold over the evaluation log:
an engine rebuilt by replaying the records continues in the middle of a
bracket. Within a sampling stage the LCM is refitted once per round (when
the least-sampled LCM-task gains a sample), not after every evaluation.

``ask`` raises :class:`~raytuner.errors.AwaitingResults` while the next step
needs evaluations still in flight, and :class:`~raytuner.errors.TuningFinished`
after the last pass.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.test_problems import DEMO_PROBLEM, demo_fidelity
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> band = GPTuneBand(problem, [{"t": 1.0}, {"t": 1.2}], seed=0, b_min=1, b_max=4, eta=2,
    ...                   executor=InlineExecutor())
    >>> while not band.finished:
    ...     s = band.ask()
    ...     y = demo_fidelity(s.config["x"], s.task["t"], b=s.fidelity, b_max=4)
    ...     record = band.tell(s, {"y": y})
    >>> [round(c, 6) for c in band.cost_per_task()] == [band.structure.cost_per_pass()] * 2
    True
    >>> band.best({"t": 1.0}).raytuner.fidelity, len(band.best_per_task())
    (4.0, 2)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np

from raytuner.engines.bandit import BanditStructure, structure_from
from raytuner.engines.base import Engine, Suggestion, source_records
from raytuner.engines.breaches import NOTE
from raytuner.engines.gptuneband.options import MODELS, GPTuneBandOptions
from raytuner.engines.gptuneband.plan import BandPlan, Step
from raytuner.engines.gptuneband.sampler import (
    LEVEL,
    SOURCE_PROPOSALS,
    LevelSampler,
    MultiObjectiveLevelSampler,
    lift_sources,
    sources_for,
)
from raytuner.engines.multiobjective import tunes_multiobjective
from raytuner.engines.sharing import OWN_DESIGN_NOTE, OWN_MODEL
from raytuner.errors import AwaitingResults, InvalidInputError, TuningFinished
from raytuner.problem.pareto import best_of, pareto_front
from raytuner.problem.records import FunctionEvaluation, Provenance, SurrogateModelRecord, task_key
from raytuner.problem.space import ProblemSpace, Space

__all__ = ["GPTuneBand", "LEVEL", "MODELS", "SOURCE_PROPOSALS"]

log = logging.getLogger(__name__)


class GPTuneBand(Engine):
    """GPTuneBand over ``tasks``; see the module docstring.

    It offers a scheduler what :class:`~raytuner.engines.MultiFidelityEngine` names.

    Args:
        problem: The problem's spaces (``gptuneband_level`` is a reserved name).
        tasks: The tasks to tune.
        seed: Seeds every sample and model fit.
        options: How it tunes (:class:`~raytuner.engines.gptuneband.options.GPTuneBandOptions`; default: its
            defaults). Its brackets are ``b_min``, ``b_max`` and ``eta``, or ``fidelities``, or ``structure``.
        structure: The brackets' fidelities and halving factor, as :class:`GPTuneBandScheduler
            <raytuner.schedulers.GPTuneBandScheduler>` takes them (``BanditStructure.hyperband(1, 27, 3)``);
            instead of the options' ``b_min``, ``b_max``, ``eta`` and ``fidelities``.
        **values: Any field of :class:`~raytuner.engines.gptuneband.options.GPTuneBandOptions` by name
            (``b_max=27``, ``passes=2``, ``executor=...``), over ``options``; an unknown name is refused in one
            line that lists them.
    """

    name = "gptuneband"

    def __init__(
        self,
        problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]],
        seed: int | None = None,
        options: GPTuneBandOptions | None = None,
        *,
        structure: BanditStructure | None = None,
        **values: Any,
    ) -> None:
        super().__init__(problem, tasks, seed)
        options = GPTuneBandOptions.given(options, **values)
        if structure is not None:
            options = options.with_structure(structure)
        self.options = options
        self.source_proposals = options.source_proposals
        self.model = options.model
        self.structure: BanditStructure = structure_from(
            options.b_min, options.b_max, options.eta, options.fidelities, options.integer_fidelities
        )
        if LEVEL in problem.input_space.names + problem.parameter_space.names:
            raise InvalidInputError("input_space", f"the name {LEVEL!r} is reserved by GPTuneBand")
        self.fidelity_mode = options.fidelity_mode
        self.objective = problem.objective(options.objective)
        # several objectives or output constraints (none named): rungs ranked by all, samples by one LCM per output
        self.multiobjective = tunes_multiobjective(problem, options.objective)
        self.plan = BandPlan(
            self.structure,
            self.objective,
            len(self.tasks),
            options,
            problem=problem if self.multiobjective else None,
        )
        named = None if self.multiobjective else self.objective.name
        self.passes, self.budget = self.plan.passes, self.plan.budget
        self.source = options.source
        self._sources: list[FunctionEvaluation] = []
        if options.source is not None:
            self._sources = lift_sources(source_records(problem, options.source), self.structure)
        # GPTune's MB_LCM starts each LCM-task with min N(s) random samples; the crowd's records stand in for half
        n_initial = options.n_initial
        if n_initial is None:
            fewest = min(self.structure.samples(s) for s in range(self.structure.s_max + 1))
            n_initial = max(1, (fewest + 1) // 2) if self._sources else fewest
        self.n_initial = n_initial
        self.executor = options.executor
        self._sampler_options = {**options.sampler_options(), "n_initial": self.n_initial, "objective": named}
        self._keep_options(**replace(options, n_initial=self.n_initial, objective=named).spec_options())
        # a Space serialises as a list (its model_serializer); pydantic types model_dump as a dict
        levels = Space.model_validate(
            cast(list[dict[str, Any]], problem.input_space.model_dump())
            + [{"name": LEVEL, "type": "integer", "lower_bound": 0, "upper_bound": max(1, self.structure.s_max)}]
        )
        self.level_problem = problem.model_copy(update={"input_space": levels})
        self._records: list[FunctionEvaluation] = []
        self._sampler: LevelSampler | None = None
        self._plain: LevelSampler | None = None  # the sampler without the sources, when they alternate
        self._sampler_key: tuple[int, int] | None = None
        self._models: list[SurrogateModelRecord] = []  # the stored models and those fitted since
        self._fixed_models = False

    # -- plan state ------------------------------------------------------------------------------
    @property
    def current_pass(self) -> int:
        """The pass in progress (0-based): the lowest pass an unfinished task has not completed."""
        return self.plan.current_pass()

    @property
    def finished(self) -> bool:
        """Whether every task is finished (see :meth:`finished_tasks`)."""
        return not self.plan.open_tasks()

    def finished_tasks(self) -> list[bool]:
        """Per task, whether it is finished: every pass complete, or (with a ``budget``) its next
        step does not fit in what is left of its budget and nothing of it is in flight."""
        return [self.plan.finished(i) for i in range(len(self.tasks))]

    def stage(self) -> int:
        """The current pass's sampling stage: the lowest bracket an unfinished task has not sampled fully."""
        return self.plan.stage(self.current_pass)

    def lcm_tasks(self) -> list[tuple[dict[str, Any], int]]:
        """The LCM-tasks of the current LCM: ``(task, bracket)`` for every bracket still sampling."""
        if self.finished:
            return []
        stage = self.stage()
        return [
            (dict(self.tasks[i]), j) for i in range(len(self.tasks)) for j in range(stage, self.structure.s_max + 1)
        ]

    # -- ask -------------------------------------------------------------------------------------
    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """The next evaluation: a ready promotion first, else a new sample for the least-sampled LCM-task.

        Promotions go first to the task that has spent least, so tasks
        advance evenly; a task whose next step does not fit in its budget
        gets nothing more. ``task`` restricts the choice to one task.

        Args:
            task: Restrict the choice to this task (default: any task).

        Raises:
            TuningFinished: Every task (or ``task``) is finished.
            AwaitingResults: The next step waits for evaluations in flight.
        """
        only = None if task is None else self.task_index(task)
        if self.finished:
            raise TuningFinished(f"GPTuneBand is finished: {self._finish_reason()}")
        if only is not None and self.plan.finished(only):
            raise TuningFinished(f"task {dict(self.tasks[only])} is finished: {self._finish_reason()}")
        ready = self.plan.ready_promotions(only)
        if ready:
            return self._promotion(ready[0])
        sample = self._next_sample(only)
        if sample is not None:
            return sample
        raise AwaitingResults("the next GPTuneBand step waits for evaluations in flight")

    def _finish_reason(self) -> str:
        if self.budget is None:
            return f"all {self.passes} passes are complete"
        return f"its budget of {self.budget:g} (normalised cost per task) is spent as far as the plan allows"

    def ready_promotions(self) -> int:
        """How many tasks have a promotion to hand out now (0: the next ask is no promotion).

        Promotions come before new samples: the next :meth:`ask` returns one,
        naming its parent (``provenance.parent``), so a scheduler asks once
        and routes it by that parent.
        """
        return len(self.plan.ready_promotions(None))

    def retired(self, uid: str) -> bool:
        """Whether evaluation ``uid`` will never be continued: at ``b_max``, failed, lost its rung, or its task is done.

        An evaluation whose rung is still open is not retired (it may be promoted).

        Args:
            uid: The evaluation's uid (an unknown one is retired).
        """
        record = self.plan.brackets.by_uid.get(uid)
        if record is not None and self.plan.finished(self.task_index(record.task_parameter)):
            return True
        return self.plan.brackets.retired(uid)

    def _promotion(self, step: Step) -> Suggestion:
        assert step.promotion is not None
        (p, i, s), rung, parent = step.promotion
        source = self.plan.brackets.by_uid[parent]
        level = s - rung
        fidelity = self.structure.fidelity(level)
        previous = (source.raytuner.fidelity if source.raytuner else None) or self.structure.fidelity(level + 1)
        provenance = self._provenance(p, s, rung, fidelity, "promotion", previous=previous, parent=parent)
        self.plan.asked(i, source.tuning_parameter, provenance)
        return Suggestion(task=dict(self.tasks[i]), config=dict(source.tuning_parameter), provenance=provenance)

    def _provenance(
        self,
        p: int,
        s: int,
        rung: int,
        fidelity: float,
        source: str,
        previous: float | None = None,
        parent: str | None = None,
        **notes: Any,
    ) -> Provenance:
        return Provenance(
            engine=self.name,
            proposer=source,
            bracket=s,
            rung=rung,
            pass_=p + 1,
            fidelity=fidelity,
            parent=parent,
            cost=self.structure.cost(fidelity, previous, self.fidelity_mode),
            **notes,
        )

    def _next_sample(self, only: int | None) -> Suggestion | None:
        place = self.plan.next_sample(only)
        if place is None:
            return None
        p, i, j = place
        sampler, lifted = self._level_sampler(), {**self.tasks[i], LEVEL: j}
        other = self._plain
        if (
            other is not None
            and self.plan.samples_given(i, j) % 2 == 1
            and not sampler.designing(lifted)
            and not other.designing(lifted)
        ):
            sampler, other = other, sampler  # the plain LCM's turn
        suggestion = sampler.ask(lifted)
        self._new_models.extend(made := sampler.take_models())
        self._models.extend([] if self._fixed_models else made)  # as it is: a stored model only, as GPTune's
        if other is not None:
            other.add_pending(lifted, suggestion.config)
        how = suggestion.provenance.proposer or "model"
        how = "plain_model" if sampler is self._plain and how == "model" else how
        noted = {
            k: v
            for k, v in (suggestion.provenance.model_extra or {}).items()
            if k in (NOTE, OWN_MODEL, OWN_DESIGN_NOTE)
        }
        provenance = self._provenance(p, j, 0, self.structure.fidelity(j), how, **noted)  # a likely success
        self.plan.asked(i, suggestion.config, provenance)
        return Suggestion(task=dict(self.tasks[i]), config=suggestion.config, provenance=provenance)

    def _level_sampler(self) -> LevelSampler:
        """The sampler of the current (pass, stage), with the sources, rebuilt from the log when either moved.

        With sources that alternate (``source_proposals``), its twin without them is rebuilt beside it.
        """
        key = (self.current_pass, self.stage())
        if self._sampler is not None and self._sampler_key == key:
            return self._sampler
        sources = sources_for(self._sources, self.tasks, 0 if self.model == "levels" else key[1])
        self._sampler = self._build_sampler(key, sources)
        self._plain = (
            self._build_sampler(key, [], plain=True) if sources and self.source_proposals == "alternate" else None
        )
        self._sampler_key = key
        log.info("GPTuneBand pass %d stage %d: LCM over %d LCM-tasks", key[0] + 1, key[1], len(self._sampler.lcm_tasks))
        return self._sampler

    def _build_sampler(
        self, key: tuple[int, int], sources: list[FunctionEvaluation], plain: bool = False
    ) -> LevelSampler:
        """A sampler of (pass, stage) ``key`` holding ``sources`` and the log's records of its LCM-tasks.

        The ``plain`` twin's models are stored apart from those fitted with sources (its :meth:`~LevelSampler.sampler`).
        """
        kind = MultiObjectiveLevelSampler if self.multiobjective else LevelSampler
        known = [*self.plan.brackets.by_uid, *(r.uid for r in self._sources)]  # this run's: warm starts
        sampler = kind(
            self.level_problem,
            self.tasks,
            self.structure,
            key[0],
            key[1],
            self.model == "levels",
            self.seed,
            plain=plain,
            known=known,
            quotas=self.plan.quotas(key[0]),
            **self._sampler_options,
            **({"source": sources} if sources else {}),
        )
        wanted = {task_key({**self.tasks[i], LEVEL: j}) for i, j in sampler.lcm_tasks}
        for record in self._records:
            level = self._level_of(record)
            if level is not None:
                lifted = self._lift(record, level)
                if task_key(lifted.task_parameter) in wanted:
                    sampler.fold(lifted)
        for p, i, j, config in self.plan.in_flight.places():
            if p == key[0] and j >= key[1]:
                sampler.add_pending({**self.tasks[i], LEVEL: j}, config)
        sampler.restore_models(self._models, fixed=self._fixed_models)
        return sampler

    # -- tell ------------------------------------------------------------------------------------
    @staticmethod
    def _level_of(record: FunctionEvaluation) -> int | None:
        prov = record.raytuner
        if prov is None or prov.bracket is None or prov.rung is None:
            return None
        return prov.bracket - prov.rung

    @staticmethod
    def _lift(record: FunctionEvaluation, level: int) -> FunctionEvaluation:
        return record.model_copy(update={"task_parameter": {**record.task_parameter, LEVEL: level}})

    def _admit(self, record: FunctionEvaluation) -> FunctionEvaluation:
        """``record``, of one of the engine's tasks, placed in the plan (:meth:`BandPlan.place`)."""
        return self.plan.place(self.task_index(record.task_parameter), record)

    def _fold(self, record: FunctionEvaluation) -> None:
        """Fold one evaluation in (a repeated uid, an unknown task or a record without a bracket is ignored)."""
        prov = record.raytuner
        if record.uid in self.plan.brackets.by_uid or prov is None or prov.bracket is None or prov.rung is None:
            return
        try:
            i = self.task_index(record.task_parameter)
        except InvalidInputError:
            return
        if not 0 <= prov.bracket <= self.structure.s_max or not 0 <= prov.rung <= prov.bracket:
            log.warning(
                "record %s has bracket %s rung %s outside the plan; ignored", record.uid, prov.bracket, prov.rung
            )
            return
        self._records.append(record)
        self.plan.told(i, record)
        lifted = self._lift(record, prov.bracket - prov.rung)
        for sampler in (self._sampler, self._plain):
            if sampler is not None and any(task_key(lifted.task_parameter) == task_key(t) for t in sampler.tasks):
                sampler.fold(lifted)

    def add_pending(
        self, task: Mapping[str, Any], config: Mapping[str, Any], provenance: Provenance | None = None
    ) -> None:
        """Count an adopted trial as in flight, placed in the plan by its provenance (its bracket, rung, pass and
        parent)."""
        if provenance is None or provenance.bracket is None or provenance.rung is None:
            log.warning("an adopted GPTuneBand trial has no bracket/rung; it is not counted as in flight")
            return
        i = self.task_index(task)
        p = (provenance.pass_ or 1) - 1
        self.plan.asked(i, config, provenance)
        if (
            provenance.rung == 0
            and self._sampler is not None
            and self._sampler_key == (p, self.stage())
            and provenance.bracket >= self._sampler.stage
        ):
            for sampler in (self._sampler, self._plain):
                if sampler is not None:
                    sampler.add_pending({**self.tasks[i], LEVEL: provenance.bracket}, config)

    # -- results ---------------------------------------------------------------------------------
    def best(self, task: Mapping[str, Any] | None = None, objective: str | None = None) -> FunctionEvaluation | None:
        """The best evaluation of ``task`` at ``b_max`` (see :meth:`Engine.best`); lower fidelities never count.

        Args:
            task: One of the engine's tasks (default: its first).
            objective: The objective's name (default: the one the engine tunes).
        """
        at_b_max = [r for r in self._records if self._level_of(r) == 0]
        return best_of(self.problem, at_b_max, self._best_task(task), self._best_objective(objective))

    def pareto_front(self, task: Mapping[str, Any]) -> list[FunctionEvaluation]:
        """The feasible evaluations of ``task`` at ``b_max`` that no other one dominates.

        Args:
            task: The task.
        """
        return pareto_front(self.problem, [r for r in self._records if self._level_of(r) == 0], task)

    def cost_per_task(self) -> list[float]:
        """The normalised cost told so far, per task (``b / b_max`` per evaluation, the increment when iterative)."""
        return list(self.plan.told_cost)

    def progress(self) -> dict[str, Any]:
        """Where the run stands: pass, stage, evaluations told and in flight, cost per task, budget, tasks finished.

        ``passes`` is ``None`` when a budget alone ends the run.
        """
        finished = self.finished
        current = self.current_pass if self.passes is None else min(self.current_pass, self.passes - 1)
        return {
            "pass": current + 1,
            "passes": self.passes,
            "stage": None if finished else self.stage(),
            "evaluations": len(self._records),
            "in_flight": self.plan.in_flight.count(),
            "cost_per_task": float(np.mean(self.cost_per_task())),
            "budget": self.budget,
            "tasks_finished": sum(self.finished_tasks()),
            "finished": finished,
        }

    def restore_models(self, models: Sequence[SurrogateModelRecord], fixed: bool = False) -> None:
        """Keep stored models, which a sampler warm-starts from (:mod:`~raytuner.engines.stored_models`).

        Args:
            models: The stored surrogate-model records, oldest first.
            fixed: The sampler uses that model as it is (see :meth:`StoredModels.restore_models`).
        """
        self._models, self._fixed_models = list(models), fixed
        self._sampler, self._plain, self._sampler_key = None, None, None
