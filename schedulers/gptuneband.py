"""GPTuneBand as a Ray Tune scheduler, with the searcher that feeds its brackets.

One object owns the engine (:class:`raytuner.engines.GPTuneBand`) and its
:class:`~raytuner.session.tuning_session.TuningSession`; :meth:`GPTuneBandScheduler.searcher` hands out
the paired searcher. Pass both to Ray::

    band = GPTuneBandScheduler(problem, tasks, "runs/", "demo", structure=BanditStructure.hyperband(1, 27, 3))
    tune.run(trainable, search_alg=band.searcher(), scheduler=band, num_samples=-1)

Trial configs are flat (task and tuning parameters side by side).

- **One-shot fidelity** (``fidelity_mode="one_shot"``, HPC codes): the
  trainable reads ``config[fidelity_key]`` (default ``"fidelity"``), runs once
  and reports the metric; a promotion is a new trial at the higher fidelity.
- **Iterative fidelity** (``"iterative"``, training): the trainable reports
  every iteration (``result[time_attr]`` counts fidelity, by default
  ``training_iteration``); the scheduler records the evaluation when a trial
  reaches its rung's fidelity, PAUSEs it until the rung is complete, then
  resumes the promoted trials and stops the others. Resuming continues from
  the trial's last checkpoint, so the trainable **must checkpoint** (report
  with ``checkpoint=`` and restore from ``ray.tune.get_checkpoint()``);
  a trainable without checkpoints restarts from scratch on every promotion,
  and the scheduler then charges the full fidelity and logs a warning.

Every evaluation is persisted to the store before Ray hears the decision,
including results of trials the scheduler stops; a trial that errors or ends
before its fidelity is a failed evaluation. Every trial is in the store's
ledger before Ray gets it (the session's durable ask), so the checkpoint holds
only the session id and which Ray trial runs which evaluation. Suggestions come from the
driver; LCM fits run on zero-CPU Ray actors, so they never wait for CPUs
that trials hold and spread over the nodes of a cluster (without a named
executor, fits of at most ``INLINE_RECORDS`` records run inline in the driver).

Example:
    >>> import tempfile
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> from raytuner.engines import BanditStructure
    >>> band = GPTuneBandScheduler(ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}, {"t": 1.2}], tempfile.mkdtemp(),
    ...                   "demo", seed=0, structure=BanditStructure.hyperband(1, 9, 3))
    >>> band.engine.structure.fidelities
    (9.0, 3.0, 1.0)
    >>> searcher = band.searcher()
    >>> config = searcher.suggest("trial_1")
    >>> sorted(config), config["fidelity"] in (1.0, 3.0, 9.0)
    (['fidelity', 't', 'x'], True)
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler
from raytuner.schedulers.gptuneband_searcher import GPTuneBandSearcher
from raytuner.searchers.common import SessionResults, ask_for_ray, extra_outputs, one_or_all, warn_failed
from raytuner.searchers.param_space import space_from_ray

from raytuner.engines import BanditStructure, EngineSpec, MultiFidelityEngine, build_engine, fresh_engine
from raytuner.engines.base import Suggestion
from raytuner.engines.gptuneband.options import GPTuneBandOptions
from raytuner.errors import AwaitingResults, InvalidInputError, TuningFinished
from raytuner.problem.records import as_number
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import Trial as SessionTrial
from raytuner.session.tuning_session import TuningSession
from raytuner.store import HistoryStore, open_store

if TYPE_CHECKING:
    from ray.tune.execution.tune_controller import TuneController

__all__ = ["GPTuneBandOptions", "GPTuneBandScheduler"]

log = logging.getLogger(__name__)


@dataclass
class _TrialState:
    """What the scheduler knows of one Ray trial: its open evaluation and how far it got."""

    session_trial: str  # the session's trial id of the open (or last) evaluation
    target: float  # fidelity at which the open evaluation is recorded
    start: float = 0.0  # fidelity the current segment started from (iterative)
    reached: float = 0.0  # last value of time_attr seen
    told: bool = False  # the open evaluation is recorded
    live: bool = True  # the Ray trial has not ended
    uid: str | None = None  # uid of the last recorded evaluation
    rung: int = 0


class GPTuneBandScheduler(SessionResults, TrialScheduler):
    """The GPTuneBand scheduler; see the module docstring.

    Evaluations already stored for the problem's tasks are replayed, so a new
    run continues an interrupted one mid-bracket. The engine's options are
    those of :class:`raytuner.engines.GPTuneBand`.

    Args:
        problem: The problem's spaces.
        tasks: The tasks to tune.
        store: A :class:`~raytuner.store.HistoryStore` or where to open one.
        problem_name: The problem's name in the store.
        metric: The objective, or a list of objectives tuned together (default: every optimised output, so a
            problem with several objectives or an output constraint ranks each rung by non-dominated
            sorting with crowding, as Ray Tune's ``OptunaSearch`` takes ``metric=[...]``).
        mode: Ray's ``"min"``/``"max"``, a list for a list of metrics (follows the goals).
        seed: The engine's seed.
        structure: The brackets' fidelities and halving factor (``BanditStructure.hyperband(b_min, b_max, eta)``).
        options: Everything else (:class:`~raytuner.engines.gptuneband.options.GPTuneBandOptions`; default: its
            defaults), but the brackets (``structure``'s) and the objective (``metric``).
        **session_options: Options of the :class:`~raytuner.session.tuning_session.TuningSession`.
    """

    _supports_buffered_results = False

    def __init__(
        self,
        problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]],
        store: HistoryStore | str | os.PathLike[str],
        problem_name: str,
        metric: str | list[str] | None = None,
        mode: str | list[str] | None = None,
        seed: int | None = None,
        *,
        structure: BanditStructure,
        options: GPTuneBandOptions | None = None,
        **session_options: Any,
    ) -> None:
        options = GPTuneBandOptions.given(options).with_structure(structure)
        if options.objective is not None:
            raise InvalidInputError("options.objective", "the scheduler tunes its metric: pass metric instead")
        fidelity_key, time_attr = options.fidelity_key, options.time_attr
        super().__init__()
        #: The objectives tuned and their Ray modes, in order (one, or every optimised output).
        self.metrics, self.modes = one_or_all(problem, metric, mode)
        if fidelity_key in problem.input_space.names + problem.parameter_space.names:
            raise InvalidInputError("fidelity_key", f"{fidelity_key!r} is already a task or tuning parameter")
        self.problem = problem
        # Ray's trial schedulers take one metric (its controller checks each result for it): the first
        self._metric, self.mode = self.metrics[0], self.modes[0]
        self.fidelity_key = fidelity_key
        self.time_attr = time_attr
        named = None if metric is None or len(self.metrics) > 1 else self.metrics[0]
        engine = build_engine(
            EngineSpec("gptuneband", replace(options, objective=named).spec_options()),
            problem,
            tasks,
            seed,
            executor=options.executor,
            source=options.source,
        )
        # an Engine as the registry builds it, and the multi-fidelity engine this scheduler drives
        self.engine = cast(MultiFidelityEngine, engine)
        # a result counts once it has every objective tuned (with several, every bounded output too)
        self._awaited = [o.name for o in problem.modelled] if getattr(self.engine, "several", False) else self.metrics
        self.store = open_store(store)
        self._session_options = session_options
        self.session = TuningSession.resume(problem, engine, self.store, problem_name, **session_options)
        self._states: dict[str, _TrialState] = {}
        self._held: list[SessionTrial] = []  # asked, for the next suggests: their Ray trial is gone
        self._warned_restart = False
        #: Most evaluations in flight at once (``max_concurrent_trials``; paused trials do not count).
        self.max_concurrent: int | None = None

    @classmethod
    def from_param_space(
        cls,
        param_space: Mapping[str, Any],
        store: HistoryStore | str | os.PathLike[str],
        problem_name: str,
        *,
        task_keys: Sequence[str] = (),
        metric: str,
        mode: str,
        structure: BanditStructure,
        **arguments: Any,
    ) -> GPTuneBandScheduler:
        """A scheduler over a Ray ``param_space``, as the searchers' ``from_param_space`` reads one.

        The keys named in ``task_keys`` are the task parameters (their values are the tasks); ``mode``
        is the objective's goal. The fidelity is the scheduler's to give (``config["fidelity"]``), so
        the space holds no constants: give them to the trainable (``tune.with_parameters``).

        Args:
            param_space: Ray's search space (see :mod:`raytuner.searchers.param_space`).
            store: The history store (a folder, a URI or a store).
            problem_name: The problem's name in the store.
            task_keys: The keys that are task parameters.
            metric: The objective's name.
            mode: ``"min"`` or ``"max"``: the objective's goal.
            structure: The bandit structure (fidelities and brackets).
            **arguments: The constructor's other arguments (``seed``, ``options``, ...).

        >>> from ray import tune
        >>> import tempfile
        >>> band = GPTuneBandScheduler.from_param_space(
        ...     {"t": tune.grid_search([1.0, 4.0]), "x": tune.uniform(0, 1)}, tempfile.mkdtemp(), "band",
        ...     task_keys=["t"], metric="score", mode="max", structure=BanditStructure([3, 1], 3))
        >>> band.engine.spec_tasks, band.problem.objective("score").goal, band.mode
        ([{'t': 1.0}, {'t': 4.0}], 'maximize', 'max')
        """
        space = space_from_ray(param_space, metric, mode, task_keys=task_keys)
        if space.constants:
            raise InvalidInputError(
                "param_space",
                f"{sorted(space.constants)} are constants; GPTuneBand's configurations carry the tuned parameters "
                "and the fidelity only: give constants to the trainable (tune.with_parameters)",
            )
        return cls(space.problem, space.tasks, store, problem_name, metric, mode, structure=structure, **arguments)

    @property
    def iterative(self) -> bool:
        """Whether promotions continue trials (iterative fidelity) rather than start new ones."""
        return self.engine.fidelity_mode == "iterative"

    def searcher(self) -> GPTuneBandSearcher:
        """The searcher that feeds this scheduler's brackets: pass it as ``search_alg``."""
        return GPTuneBandSearcher(self)

    def results(self) -> TuningSession:
        """The session (a new one after :meth:`restore_state`); its best evaluations count at ``b_max`` only."""
        return self.session

    def set_search_properties(self, metric: str | list[str] | None, mode: str | list[str] | None, **spec: Any) -> bool:
        """Accept a Tuner-level metric/mode (or lists) only when they agree with the objectives tuned.

        A ``mode`` that contradicts an objective's goal, or a metric that is not an optimised
        output, is refused in one line naming both; a missing one is the problem's.
        """
        names, modes = one_or_all(self.problem, metric, mode)
        return sorted(names) == sorted(self.metrics) or metric is None

    # -- searcher side ---------------------------------------------------------------------------
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """The flat config of a new trial, ``None`` while waiting, ``Searcher.FINISHED`` at the end.

        Args:
            trial_id: Ray's id of the new trial.
        """
        if self.iterative:
            self._continue_promoted()
        if self.max_concurrent and sum(not s.told for s in self._states.values()) >= self.max_concurrent:
            return None
        trial = self._held.pop(0) if self._held else ask_for_ray(self.session, trial_id)
        if not isinstance(trial, SessionTrial):
            return trial
        self._states[trial_id] = _TrialState(
            session_trial=trial.trial_id, target=float(trial.fidelity or 0.0), rung=trial.provenance.rung or 0
        )
        config = {**trial.task, **trial.config}
        if not self.iterative:
            config[self.fidelity_key] = trial.fidelity
        return config

    def finish(self, trial_id: str, result: Mapping[str, Any] | None, error: bool) -> None:
        """Record a trial that ended (completed, stopped or errored) if its evaluation is still open.

        Called by the searcher's and the scheduler's completion hooks, whichever comes first.

        Args:
            trial_id: Ray's trial id.
            result: The trial's last result (``None``: none).
            error: Whether the trial raised.
        """
        state = self._states.get(trial_id)
        if state is None or state.told:
            return
        if error:
            self._tell(trial_id, state, None, failure="trial raised an error")
        elif result is not None and self._reached(state, result):
            self._tell(trial_id, state, result)
        else:
            got = result.get(self.time_attr) if result else None
            self._tell(
                trial_id,
                state,
                None,
                failure=f"trial ended before fidelity {state.target:g} ({self.time_attr} = {got})",
            )

    # -- scheduler side --------------------------------------------------------------------------
    def on_trial_add(self, tune_controller: TuneController, trial: Trial) -> None:
        """Check that the trial came from this scheduler's searcher."""
        if trial.trial_id not in self._states:
            if trial.status in (Trial.TERMINATED, Trial.ERROR):  # an ended trial re-added by a restore
                return
            raise InvalidInputError(
                "search_alg",
                "GPTuneBand schedules only the trials of its own searcher: pass search_alg=band.searcher()",
            )

    def on_trial_result(self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]) -> str:
        """Record the evaluation when the trial reaches its fidelity; then STOP, PAUSE or CONTINUE it."""
        tid = trial.trial_id
        state = self._states.get(tid)
        if state is None:
            return TrialScheduler.CONTINUE
        if self.iterative:
            self._track(tid, state, result)
        if not state.told and not self._reached(state, result):
            return TrialScheduler.CONTINUE
        if not state.told:
            self._tell(tid, state, result)
        return self._settle(tune_controller, tid)

    def on_trial_complete(self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]) -> None:
        """Record a trial that ended before reaching its fidelity (a failed evaluation)."""
        self._forget(trial.trial_id)
        self.finish(trial.trial_id, result, error=False)
        self._settle(tune_controller)

    def on_trial_error(self, tune_controller: TuneController, trial: Trial) -> None:
        """A trial that raised is a failed evaluation."""
        self._forget(trial.trial_id)
        self.finish(trial.trial_id, None, error=True)
        self._settle(tune_controller)

    def on_trial_remove(self, tune_controller: TuneController, trial: Trial) -> None:
        """Record the open evaluation of a trial Ray removed (paused or pending) as failed, then drop the trial.

        Recorded here rather than in the searcher's completion hook (which Ray calls next, without the
        controller), so that the trials this record retires are stopped at once.
        """
        self._forget(trial.trial_id)
        self.finish(trial.trial_id, None, error=False)
        self._settle(tune_controller)

    def choose_trial_to_run(self, tune_controller: TuneController) -> Trial | None:
        """Paused trials with an open evaluation first (promotions: they complete rungs), then new trials in order.

        A promotion routed to a trial while its pause was in flight is picked up here once Ray has paused it.
        """
        trials = tune_controller.get_trials()
        paused = (t for t in trials if t.status == Trial.PAUSED and t.trial_id in self._states)
        return next(
            (t for t in paused if self._states[t.trial_id].live and not self._states[t.trial_id].told), None
        ) or next((t for t in trials if t.status == Trial.PENDING), None)

    def debug_string(self) -> str:
        """A one-line progress summary for Ray's status output."""
        p = self.engine.progress()
        passes = f"{p['pass']}/{p['passes']}" if p["passes"] is not None else f"{p['pass']}"
        return (
            f"GPTuneBand: pass {passes}, stage {p['stage']}, {p['evaluations']} evaluations, "
            f"{p['in_flight']} in flight, normalised cost per task {p['cost_per_task']:.2f}"
        )

    # -- internals -------------------------------------------------------------------------------
    def _forget(self, tid: str) -> None:
        if tid in self._states:
            self._states[tid].live = False

    def _reached(self, state: _TrialState, result: Mapping[str, Any]) -> bool:
        if any(m not in result for m in self._awaited):
            return False
        if not self.iterative:
            return True
        value = as_number(result.get(self.time_attr))
        return value is not None and value >= state.target - 1e-9

    def _track(self, tid: str, state: _TrialState, result: Mapping[str, Any]) -> None:
        value = as_number(result.get(self.time_attr))
        if value is None:
            return
        if value < state.reached:  # resumed without a checkpoint: training restarted
            state.start = 0.0
            if not self._warned_restart:
                self._warned_restart = True
                log.warning(
                    "trial %s restarted from scratch after a pause: its trainable saves no checkpoint, "
                    "so every promotion retrains from the start and pays the full fidelity; report with "
                    "checkpoint=... and restore from ray.tune.get_checkpoint()",
                    tid,
                )
        state.reached = value

    def _tell(self, tid: str, state: _TrialState, result: Mapping[str, Any] | None, failure: str | None = None) -> None:
        update: dict[str, Any] = {}
        if self.iterative and result is not None:
            reached = as_number(result.get(self.time_attr, state.target))
            reached = state.target if reached is None else reached
            update = {"fidelity": reached, "cost": (reached - state.start) / self.engine.structure.b_max}
        outputs = {o: result[o] for o in self.problem.objectives if o in result} if result else None
        if failure is None and result is not None and isinstance(result.get("failure"), str):
            failure = result["failure"]  # the trainable said why it failed
        extra = extra_outputs(result, self.problem.objectives) if result else {}
        record = self.session.tell(
            state.session_trial, outputs, failure=failure, additional_output=extra, provenance=update
        )
        state.told, state.uid = True, record.uid
        if result is not None:  # Ray says a trial that raised; a bad reported value is said here
            warn_failed(tid, record, result, self.problem.objectives)

    def _retired(self, state: _TrialState) -> bool:
        """Whether the trial's last evaluation is recorded and will never be promoted."""
        return state.told and state.uid is not None and self.engine.retired(state.uid)

    def _stop_retired(self, tune_controller: TuneController, current: str | None) -> None:
        """Stop every live trial (but ``current``, whose result Ray is handling) whose evaluation is now retired.

        Such a trial waits for its rung: Ray has paused it, or is pausing it. A pause is in flight until the
        trial's checkpoint is saved (its status stays ``RUNNING`` meanwhile, and no result of it comes any
        more), so a trial retired then must be stopped now, whatever its status: checking only the
        ``PAUSED`` ones left it paused for ever and the run never ended. Ray's ``stop_trial`` drops the save
        in flight.
        """
        waiting = [tid for tid, state in self._states.items() if tid != current and state.live and self._retired(state)]
        for trial in tune_controller.get_trials() if waiting else ():
            if trial.trial_id in waiting and trial.status in (Trial.PAUSED, Trial.RUNNING, Trial.PENDING):
                log.debug("stopping trial %s (%s): its evaluation is retired", trial.trial_id, trial.status)
                tune_controller.stop_trial(trial)

    def _settle(self, tune_controller: TuneController, current: str | None = None) -> str:
        """After a tell: continue promoted trials, stop the other trials it retired; the current trial's action."""
        if self.iterative:
            self._continue_promoted()
            self._stop_retired(tune_controller, current)
        if current is None:
            return TrialScheduler.CONTINUE
        state = self._states[current]
        if not self.iterative or self._retired(state):
            return TrialScheduler.STOP
        if not state.told:  # promoted on the spot: keep training
            return TrialScheduler.CONTINUE
        return TrialScheduler.PAUSE

    def _continue_promoted(self) -> None:
        """Turn ready promotions into continued training of the Ray trials that made their parents (iterative).

        Each promotion is asked of the session once and routed by its parent:
        the live Ray trial that produced the parent continues, or, when that
        trial is gone (an earlier run), the next :meth:`suggest` starts it.
        """
        while not self._held and self.engine.ready_promotions():
            try:
                trial = self.session.ask(trial_id=self._promotion_name)
            except (AwaitingResults, TuningFinished):
                return
            tid = self._trial_of(trial.provenance.parent)
            if tid is None:
                self._held.append(trial)
                return
            state = self._states[tid]
            state.session_trial, state.target, state.told = trial.trial_id, float(trial.fidelity or 0), False
            state.start, state.rung = state.reached, trial.provenance.rung or 0

    def _promotion_name(self, suggestion: Suggestion) -> str:
        """A promotion's trial id: ``<Ray trial>@<records told>`` when it continues that Ray trial."""
        tid = self._trial_of(suggestion.provenance.parent)
        return f"{tid}@{len(self.session.records)}" if tid is not None else uuid.uuid4().hex

    def _trial_of(self, uid: str | None) -> str | None:
        """The live Ray trial whose last recorded evaluation is ``uid``."""
        for tid, state in self._states.items():
            if uid is not None and state.uid == uid and state.live:
                return tid
        return None

    # -- checkpointing (Tuner.restore) -------------------------------------------------------------
    def save_state(self, path: str) -> None:
        """Write the session id and which live Ray trial runs which evaluation (the ledger and store hold the rest).

        Args:
            path: The checkpoint file.
        """
        open_trials = {tid: asdict(s) for tid, s in self._states.items() if s.live}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"states": open_trials, "session_id": self.session.session_id}, fh)

    def restore_state(self, path: str) -> None:
        """Resume the saved session (the engine replays the store and adopts the trials in flight).

        A trial in flight that no saved Ray trial runs goes to the next :meth:`suggest`.

        Args:
            path: The checkpoint file.
        """
        with open(path, encoding="utf-8") as fh:
            state = json.load(fh)
        options = {**self._session_options, "session_id": state.get("session_id")}
        engine = fresh_engine(self.session.engine)
        self.engine = cast(MultiFidelityEngine, engine)
        self.session = TuningSession.resume(self.problem, engine, self.store, self.session.problem_name, **options)
        self._states = {tid: _TrialState(**s) for tid, s in state.get("states", {}).items()}
        running = {s.session_trial for s in self._states.values() if not s.told}
        self._held = [t for tid, t in self.session.pending.items() if tid not in running]
        log.info(
            "restored GPTuneBand: %d evaluations replayed, %d open trials, %d trials for new Ray trials",
            len(self.session.records),
            len(self._states),
            len(self._held),
        )
