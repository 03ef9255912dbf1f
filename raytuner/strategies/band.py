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
    >>> from raytuner.space import ProblemSpace
    >>> from raytuner.records import FunctionEvaluation
    >>> from raytuner.executors import InlineExecutor
    >>> from raytuner.testing.functions import DEMO_PROBLEM, demo_fidelity
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> band = GPTuneBand(problem, [{"t": 1.0}, {"t": 1.2}], seed=0, b_min=1, b_max=4, eta=2,
    ...                   executor=InlineExecutor())
    >>> while not band.finished:
    ...     s = band.ask()
    ...     y = demo_fidelity(s.config["x"], s.task["t"], b=s.fidelity, b_max=4)
    ...     band.tell(FunctionEvaluation.create(s.task, s.config, {"y": y}, provenance=s.provenance))
    >>> [round(c, 6) for c in band.cost_per_task()] == [band.structure.cost_per_pass()] * 2
    True
    >>> best = band.best()
    >>> best[0].raytuner.fidelity
    4.0
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Mapping, Sequence

import numpy as np

from raytuner.errors import AwaitingResults, InvalidInputError, TuningFinished
from raytuner.executors import Executor
from raytuner.models import LCMOptions
from raytuner.records import FunctionEvaluation, Provenance, SurrogateModelRecord, task_key
from raytuner.space import ProblemSpace, Space
from raytuner.strategies.bandit import BanditStructure, FidelityMode, check_mode, structure_from
from raytuner.strategies.base import Strategy, Suggestion
from raytuner.strategies.brackets import Brackets
from raytuner.strategies.mla import MLA

__all__ = ["GPTuneBand", "LEVEL"]

log = logging.getLogger(__name__)

#: The extra task parameter that tells the LCM-tasks of one task apart (the bracket's fidelity index).
LEVEL = "gptuneband_level"

#: GPTuneBand's models (the ``model`` option).
MODELS = ("paper", "levels")


class _LevelSampler(MLA):
    """MLA over LCM-tasks, refitting once per sampling round of the current pass."""

    name = "gptuneband"

    def __init__(self, band: "GPTuneBand", pass_index: int, stage: int, **options: Any) -> None:
        self.pass_index = pass_index
        self.stage = stage
        structure = band.structure
        self.every_level = band.model == "levels"
        lowest = 0 if self.every_level else stage
        self.lcm_tasks = [(i, j) for i in range(len(band.tasks)) for j in range(lowest, structure.s_max + 1)]
        tasks = [{**band.tasks[i], LEVEL: j} for i, j in self.lcm_tasks]
        super().__init__(band.level_problem, tasks, seed=band.seed, **options)
        self._quota = [structure.samples(j) for _, j in self.lcm_tasks]
        self._sampled = [0] * len(self.lcm_tasks)
        self._round: int | None = None
        self._horizon = 0

    def fit_horizon(self) -> int:
        return self._horizon

    def scored_task(self, index: int) -> int:
        if not self.every_level:
            return index
        i, _ = self.lcm_tasks[index]
        return self.lcm_tasks.index((i, 0))        # the prediction at b_max

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


class GPTuneBand(Strategy):
    """GPTuneBand over ``tasks``; see the module docstring.

    It offers a scheduler what :class:`~raytuner.strategies.MultiFidelityEngine` names.

    Args:
        problem: The problem's spaces (``gptuneband_level`` is a reserved name).
        tasks: The tasks to tune.
        seed: Seeds every sample and model fit.
        b_min: The lowest fidelity of Hyperband's brackets (with ``b_max`` and ``eta``).
        b_max: The highest fidelity.
        eta: The halving factor.
        fidelities: A custom fidelity list ``[B(0), ..., B(s_max)]``, instead of ``b_min`` and ``b_max``.
        integer_fidelities: Round Hyperband's fidelities to integers.
        passes: The number of passes.
        fidelity_mode: ``"one_shot"`` or ``"iterative"``.
        n_initial: Size of each LCM-task's initial LHS design (default: half of ``N(0)``, at least 1).
        options: MLA's: configure the LCM.
        acquisition: MLA's.
        acquisition_options: MLA's.
        executor: MLA's: runs the multi-start fits.
        objective: The objective to tune (default: the first).
        search_candidates: MLA's: the size of the acquisition search's global phase.
        model: ``"paper"``: the paper's LCM over the (task, bracket) pairs still sampling, each
            bracket's samples chosen by the prediction at its own fidelity; ``"levels"``: every
            fidelity level of every task stays in the LCM as a correlated output (no evaluation
            leaves the model, lower rungs inform the prediction at ``b_max``), and every bracket's
            samples are chosen by the prediction at ``b_max``.
    """

    name = "gptuneband"
    spec_name = "band"

    def __init__(self, problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]], seed: int | None = None, *,
                 b_min: float | None = None, b_max: float | None = None, eta: int | None = 3,
                 fidelities: Sequence[float] | None = None, integer_fidelities: bool = False, passes: int = 1,
                 fidelity_mode: FidelityMode = "one_shot", n_initial: int | None = None,
                 options: LCMOptions | None = None, acquisition: str = "ei",
                 acquisition_options: Mapping[str, float] | None = None, executor: Executor | None = None,
                 objective: str | None = None, search_candidates: int = 2048, model: str = "paper") -> None:
        super().__init__(problem, tasks, seed)
        if model not in MODELS:
            raise InvalidInputError("model", f"unknown GPTuneBand model {model!r}", allowed=list(MODELS))
        self.model = model
        self.structure: BanditStructure = structure_from(b_min, b_max, eta, fidelities, integer_fidelities)
        if not isinstance(passes, int) or isinstance(passes, bool) or passes < 1:
            raise InvalidInputError("passes", f"must be an integer >= 1, got {passes!r}")
        if LEVEL in problem.input_space.names + problem.parameter_space.names:
            raise InvalidInputError("input_space", f"the name {LEVEL!r} is reserved by GPTuneBand")
        self.passes = passes
        self.fidelity_mode = check_mode(fidelity_mode)
        self.objective = problem.objective(objective)
        first = self.structure.samples(0)
        self.n_initial = n_initial if n_initial is not None else max(1, (first + 1) // 2)
        self.executor = executor
        self._sampler_options: dict[str, Any] = dict(
            n_initial=self.n_initial, options=options, acquisition=acquisition,
            acquisition_options=acquisition_options, executor=executor, objective=self.objective.name,
            search_candidates=search_candidates)
        self._keep_options(b_min=b_min, b_max=b_max, eta=eta, fidelities=fidelities,
                           integer_fidelities=integer_fidelities, passes=passes, fidelity_mode=fidelity_mode,
                           n_initial=n_initial, options=options, acquisition=acquisition,
                           acquisition_options=acquisition_options, objective=self.objective.name,
                           search_candidates=search_candidates, model=model)
        levels = Space.model_validate(problem.input_space.model_dump() + [
            {"name": LEVEL, "type": "integer", "lower_bound": 0, "upper_bound": max(1, self.structure.s_max)}])
        self.level_problem = problem.model_copy(update={"input_space": levels})
        self._records: list[FunctionEvaluation] = []
        self._brackets = Brackets(self.structure, self.objective)
        self._pending_samples: dict[tuple[int, int, int], list[dict[str, Any]]] = defaultdict(list)
        self._sampler: _LevelSampler | None = None
        self._sampler_key: tuple[int, int] | None = None
        self._restored: list[SurrogateModelRecord] = []
        self._fixed_models = False

    # -- plan state ------------------------------------------------------------------------------
    def _sampled(self, p: int, i: int, j: int) -> int:
        return self._brackets.sampled((p, i, j))

    def _pass_sampling_done(self, p: int) -> bool:
        return all(self._sampled(p, i, j) >= self.structure.samples(j)
                   for i in range(len(self.tasks)) for j in range(self.structure.s_max + 1))

    def _pass_complete(self, p: int) -> bool:
        return self._pass_sampling_done(p) and all(
            self._brackets.complete(self._brackets.run((p, i, j)))
            for i in range(len(self.tasks)) for j in range(self.structure.s_max + 1))

    @property
    def current_pass(self) -> int:
        """The pass in progress (0-based; ``passes`` once every pass is complete)."""
        p = 0
        while p < self.passes and self._pass_complete(p):
            p += 1
        return p

    @property
    def finished(self) -> bool:
        """Whether every pass is complete."""
        return self.current_pass >= self.passes

    def stage(self) -> int:
        """The current pass's sampling stage: the lowest bracket still short of ``N(s)`` told samples."""
        p = self.current_pass
        for j in range(self.structure.s_max + 1):
            if any(self._sampled(p, i, j) < self.structure.samples(j) for i in range(len(self.tasks))):
                return j
        return self.structure.s_max + 1

    def lcm_tasks(self) -> list[tuple[dict[str, Any], int]]:
        """The LCM-tasks of the current LCM: ``(task, bracket)`` for every bracket still sampling."""
        p, stage = self.current_pass, self.stage()
        return [(dict(self.tasks[i]), j) for i in range(len(self.tasks)) for j in range(stage, self.structure.s_max + 1)
                if p < self.passes]

    # -- ask -------------------------------------------------------------------------------------
    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """The next evaluation: a ready promotion first, else a new sample for the least-sampled LCM-task.

        ``task`` restricts the choice to one task.

        Args:
            task: Restrict the choice to this task (default: any task).
        """
        only = None if task is None else self.task_index(task)
        if self.finished:
            raise TuningFinished(f"all {self.passes} passes of GPTuneBand are complete")
        promotion = self._next_promotion(only)
        if promotion is not None:
            return promotion
        sample = self._next_sample(only)
        if sample is not None:
            return sample
        raise AwaitingResults("the next GPTuneBand step waits for evaluations in flight")

    def ready_promotions(self) -> int:
        """How many promotions can be asked now.

        They come before new samples: the next :meth:`ask` returns one, naming its parent
        (``provenance.parent``), so a scheduler asks once and routes it by that parent.
        """
        return len(self._brackets.promotions(None))

    def retired(self, uid: str) -> bool:
        """Whether evaluation ``uid`` will never be continued: it is at ``b_max``, failed, or lost its rung.

        An evaluation whose rung is still open is not retired (it may be promoted).

        Args:
            uid: The evaluation's uid (an unknown one is retired).
        """
        return self._brackets.retired(uid)

    def _next_promotion(self, only: int | None) -> Suggestion | None:
        ready = self._brackets.promotions(only)
        if not ready:
            return None
        (p, i, s), rung, parent = ready[0]
        self._brackets.run((p, i, s)).promoting.add(parent)
        source = self._brackets.by_uid[parent]
        level = s - rung
        fidelity = self.structure.fidelity(level)
        previous = (source.raytuner.fidelity if source.raytuner else None) or self.structure.fidelity(level + 1)
        provenance = self._provenance(p, s, rung, fidelity, "promotion", previous=previous, parent=parent)
        return Suggestion(task=dict(self.tasks[i]), config=dict(source.tuning_parameter), provenance=provenance)

    def _provenance(self, p: int, s: int, rung: int, fidelity: float, source: str,
                    previous: float | None = None, parent: str | None = None) -> Provenance:
        return Provenance(strategy=self.name, source=source, bracket=s, rung=rung, pass_=p + 1,
                          fidelity=fidelity, parent=parent,
                          cost=self.structure.cost(fidelity, previous, self.fidelity_mode))

    def _next_sample(self, only: int | None) -> Suggestion | None:
        p = self.current_pass
        choices = []
        for i in range(len(self.tasks)):
            if only is not None and i != only:
                continue
            for j in range(self.structure.s_max + 1):
                used = self._sampled(p, i, j) + len(self._pending_samples[(p, i, j)])
                if used < self.structure.samples(j):
                    choices.append((used, j, i))
        if not choices:
            return None
        _, j, i = min(choices)
        sampler = self._level_sampler()
        suggestion = sampler.ask({**self.tasks[i], LEVEL: j})
        self._new_models.extend(sampler.take_models())
        self._pending_samples[(p, i, j)].append(suggestion.config)
        provenance = self._provenance(p, j, 0, self.structure.fidelity(j), suggestion.provenance.source or "model")
        return Suggestion(task=dict(self.tasks[i]), config=suggestion.config, provenance=provenance)

    def _level_sampler(self) -> _LevelSampler:
        """The sampler of the current (pass, stage), rebuilt from the log when either moved."""
        key = (self.current_pass, self.stage())
        if self._sampler is not None and self._sampler_key == key:
            return self._sampler
        sampler = _LevelSampler(self, key[0], key[1], **self._sampler_options)
        wanted = {task_key({**self.tasks[i], LEVEL: j}) for i, j in sampler.lcm_tasks}
        for record in self._records:
            level = self._level_of(record)
            if level is not None:
                lifted = self._lift(record, level)
                if task_key(lifted.task_parameter) in wanted:
                    sampler._fold(lifted)        # checked when told to the band
        for (p, i, j), configs in self._pending_samples.items():
            if p == key[0] and j >= key[1]:
                for config in configs:
                    sampler.add_pending({**self.tasks[i], LEVEL: j}, config)
        sampler.restore_models(self._restored, fixed=self._fixed_models)
        self._sampler, self._sampler_key = sampler, key
        log.debug("GPTuneBand pass %d stage %d: LCM over %d LCM-tasks", key[0] + 1, key[1], len(sampler.lcm_tasks))
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

    def _fold(self, record: FunctionEvaluation) -> None:
        """Fold one evaluation in (a repeated uid, an unknown task or a record without a bracket is ignored)."""
        prov = record.raytuner
        if record.uid in self._brackets.by_uid or prov is None or prov.bracket is None or prov.rung is None:
            return
        try:
            i = self.task_index(record.task_parameter)
        except InvalidInputError:
            return
        if not 0 <= prov.bracket <= self.structure.s_max or not 0 <= prov.rung <= prov.bracket:
            log.warning("record %s has bracket %s rung %s outside the plan; ignored", record.uid,
                        prov.bracket, prov.rung)
            return
        p = (prov.pass_ or 1) - 1
        self._records.append(record)
        self._brackets.add(record, (p, i, prov.bracket))
        if prov.rung == 0:
            pending = self._pending_samples[(p, i, prov.bracket)]
            key = task_key(record.tuning_parameter)
            for n, config in enumerate(pending):
                if task_key(config) == key:
                    del pending[n]
                    break
        if self._sampler is not None:
            lifted = self._lift(record, prov.bracket - prov.rung)
            if any(task_key(lifted.task_parameter) == task_key(t) for t in self._sampler.tasks):
                self._sampler._fold(lifted)      # checked when told to the band

    def add_pending(self, task: Mapping[str, Any], config: Mapping[str, Any],
                    provenance: Provenance | None = None) -> None:
        """Count an adopted trial as in flight, placed in the plan by its provenance.

        Args:
            task: The trial's task.
            config: Its configuration.
            provenance: What the engine wrote when it asked (bracket, rung, pass, parent).
        """
        if provenance is None or provenance.bracket is None or provenance.rung is None:
            log.warning("an adopted GPTuneBand trial has no bracket/rung; it is not counted as in flight")
            return
        i = self.task_index(task)
        p = (provenance.pass_ or 1) - 1
        if provenance.rung == 0:
            self._pending_samples[(p, i, provenance.bracket)].append(dict(config))
            if self._sampler is not None and self._sampler_key == (p, self.stage()) \
                    and provenance.bracket >= self._sampler.stage:
                self._sampler.add_pending({**self.tasks[i], LEVEL: provenance.bracket}, config)
        elif provenance.parent is not None:
            self._brackets.run((p, i, provenance.bracket)).promoting.add(provenance.parent)

    # -- results ---------------------------------------------------------------------------------
    def best(self) -> list[FunctionEvaluation | None]:
        """Per task, the best successful evaluation at ``b_max`` (``None`` where there is none)."""
        sign = self.objective.sign()
        out: list[FunctionEvaluation | None] = []
        for i in range(len(self.tasks)):
            scored = [(sign * v, n, r) for n, r in enumerate(self._records)
                      if self._level_of(r) == 0 and task_key(r.task_parameter) == task_key(self.tasks[i])
                      and (v := r.value(self.objective.name)) is not None]
            out.append(min(scored, key=lambda x: (x[0], x[1]))[2] if scored else None)
        return out

    def cost_per_task(self) -> list[float]:
        """The normalised cost told so far, per task."""
        totals = [0.0] * len(self.tasks)
        for record in self._records:
            totals[self.task_index(record.task_parameter)] += (record.raytuner.cost or 0.0) if record.raytuner else 0.0
        return totals

    def progress(self) -> dict[str, Any]:
        """Where the run stands: pass, stage, evaluations told and in flight, cost per task."""
        in_flight = sum(len(v) for v in self._pending_samples.values()) + self._brackets.in_flight()
        finished = self.finished
        return {"pass": min(self.current_pass, self.passes - 1) + 1, "passes": self.passes,
                "stage": None if finished else self.stage(), "evaluations": len(self._records), "in_flight": in_flight,
                "cost_per_task": float(np.mean(self.cost_per_task())), "finished": finished}

    def restore_models(self, models: Sequence[SurrogateModelRecord], fixed: bool = False) -> None:
        """Keep stored models so that a rebuilt sampler warm-starts from the last one of its LCM-tasks.

        Args:
            models: The stored surrogate-model records, oldest first.
            fixed: The sampler uses that model as it is (see :meth:`MLA.restore_models`).
        """
        self._restored, self._fixed_models = list(models), fixed
        self._sampler, self._sampler_key = None, None
