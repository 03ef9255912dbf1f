"""Ray Tune searchers over raytuner's ask/tell engines.

:class:`EngineSearcher` turns any :class:`raytuner.session.tuning_session.TuningSession`
into a ``ray.tune.search.Searcher``: ``suggest`` asks the session, and
``on_trial_complete`` tells it, which persists the record to the history store
before the next suggestion is made. A trial that errors, or reports no value
for the metric, or a value that is not a finite number (``"fast"``), becomes a
failed evaluation in the store that says why. The session writes each trial
to the store's ledger before Ray gets it, so the searcher's checkpoint holds
only the session id: ``restore`` resumes that session, which adopts the
trials in flight.

Trial configs are **flat**: the task parameters and the tuning parameters sit
side by side, e.g. ``{"t": 1.5, "x": 0.42}`` (names are unique across the
spaces, so they cannot clash).

Example:
    >>> import tempfile
    >>> from ray import tune
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.searchers import RandomSearcher
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> searcher = RandomSearcher(problem, tasks=[{"t": 1.0}, {"t": 2.0}],
    ...                           store=tempfile.mkdtemp(), problem_name="demo", seed=0)
    >>> def trainable(config):
    ...     tune.report({"y": (config["x"] - 0.1 * config["t"]) ** 2})
    >>> tune.run(trainable, search_alg=searcher, num_samples=6)  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ray.tune.search import Searcher
from raytuner.searchers.common import GivenPoint, SessionResults, ask_for_ray, given_points, ray_mode, warn_failed
from raytuner.searchers.param_space import RaySpace, has_samplers, space_from_ray

from raytuner.engines import Engine, EngineSpec, RandomSearch, build_engine, fresh_engine
from raytuner.errors import InvalidInputError
from raytuner.models.executors import Executor
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import Trial, TuningSession
from raytuner.store import HistoryStore, open_store

__all__ = ["EngineSearcher", "RandomSearcher", "registered_engine"]

log = logging.getLogger(__name__)

#: The keyword options a searcher passes on to its :class:`~raytuner.session.tuning_session.TuningSession`.
SESSION_OPTIONS = frozenset(
    name
    for name, p in inspect.signature(TuningSession.__init__).parameters.items()
    if p.kind is p.KEYWORD_ONLY
    or (p.default is not p.empty and name not in ("problem", "engine", "store", "problem_name"))
)


class EngineSearcher(SessionResults, Searcher):
    """A Ray Tune searcher that asks and tells a raytuner engine through a session.

    Records already stored for the problem's tasks are replayed first, so a
    new run continues an old one.

    Args:
        problem: The problem's spaces.
        engine: The engine (a fresh one).
        store: A :class:`~raytuner.store.HistoryStore` or where to open one (a directory or a
            ``mongodb://`` URI).
        problem_name: The problem's name in the store.
        metric: The objective Ray reports (default: the first objective), or a list of them for an engine
            that tunes several (:attr:`multiobjective`).
        mode: Ray's ``"min"``/``"max"`` (a list for a list of metrics); follows the goals (a contradicting one
            is an error).
        points_to_evaluate: Configurations to suggest first, in order, as Ray's own searchers take them
            (see :func:`~raytuner.searchers.common.given_points`: a point without task keys runs on
            every task); checked here, recorded with ``proposer: "given"``, learnt as any result.
        **session_options: Options of the :class:`~raytuner.session.tuning_session.TuningSession` (``session_id``,
            ``max_evaluations``, ``machine``, ...).
    """

    #: Whether the engine tunes several objectives at once (Ray's metric and mode may then be lists).
    multiobjective: ClassVar[bool] = False

    def __init__(
        self,
        problem: ProblemSpace,
        engine: Engine,
        store: HistoryStore | str | os.PathLike[str],
        problem_name: str,
        metric: str | list[str] | None = None,
        mode: str | list[str] | None = None,
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        **session_options: Any,
    ) -> None:
        unknown = sorted(set(session_options) - SESSION_OPTIONS)
        if unknown:
            raise InvalidInputError(
                "session_options",
                f"{type(self).__name__} takes no argument {unknown[0]!r} (an engine's options go in engine_options)",
                allowed=sorted(SESSION_OPTIONS),
            )
        super().__init__(*ray_mode(problem, metric, mode, self.multiobjective))
        self.problem = problem
        #: The ``param_space``'s constants, in every suggested config (Ray merges only ``tune.Tuner``'s own).
        self.constants: dict[str, Any] = {}
        given = given_points(problem, engine.spec_tasks, points_to_evaluate)  # refused before anything is opened
        self.store = open_store(store)
        self._session_options = session_options
        self.session = TuningSession.resume(problem, engine, self.store, problem_name, **session_options)
        #: The ``points_to_evaluate`` (per task) not handed out yet, next first.
        self.points_left: list[GivenPoint] = self._not_given(given)

    #: The constructor argument that takes the tasks (``target_task``: one task only).
    task_argument: ClassVar[str] = "tasks"
    #: ``(task_keys, constructor arguments)`` while waiting for ``tune.Tuner``'s ``param_space``.
    _deferred: tuple[tuple[str, ...], dict[str, Any]] | None = None

    @classmethod
    def from_param_space(
        cls,
        param_space: Mapping[str, Any] | None = None,
        *,
        task_keys: Sequence[str] = (),
        metric: str | None = None,
        mode: str | None = None,
        **arguments: Any,
    ) -> Any:
        """A searcher over a Ray ``param_space`` (see :mod:`raytuner.searchers.param_space`).

        Without ``param_space`` the searcher waits for ``tune.Tuner``'s: it builds its problem in
        :meth:`set_search_properties`, with ``TuneConfig``'s ``metric`` and ``mode`` (or these).

        Args:
            param_space: Ray's search space (``None``: ``tune.Tuner``'s ``param_space``).
            task_keys: The keys that are task parameters (their values are the tasks).
            metric: The objective's name (required, here or in ``TuneConfig``).
            mode: ``"min"``/``"max"``: the objective's goal (required, here or in ``TuneConfig``).
            **arguments: The constructor's other arguments (``store``, ``problem_name``, ``seed``, ...).
        """
        if param_space is not None:
            return cls._build(space_from_ray(param_space, metric, mode, task_keys=task_keys), arguments)
        searcher = cls.__new__(cls)
        Searcher.__init__(searcher, metric, mode)
        searcher._deferred = (tuple(task_keys), dict(arguments))
        return searcher

    @classmethod
    def _build(cls, space: RaySpace, arguments: Mapping[str, Any], into: Any = None) -> Any:
        """Construct (``into``: initialise that instance) over a :class:`~raytuner.searchers.param_space.RaySpace`."""
        if cls.task_argument == "target_task":
            if len(space.tasks) != 1:
                raise InvalidInputError("task_keys", f"{cls.__name__} tunes one target task, got {len(space.tasks)}")
            tasks: Any = space.tasks[0]
        else:
            tasks = space.tasks
        metric = space.problem.objectives[0]
        mode = "max" if space.problem.objective(metric).goal == "maximize" else "min"
        arguments = dict(arguments)
        if arguments.get("points_to_evaluate"):  # a constant of param_space may be in a point with its value
            arguments["points_to_evaluate"] = [
                {k: v for k, v in p.items() if space.constants.get(k, v is None) != v} if isinstance(p, Mapping) else p
                for p in arguments["points_to_evaluate"]
            ]
        kwargs = {"problem": space.problem, cls.task_argument: tasks, "metric": metric, "mode": mode, **arguments}
        searcher = cls(**kwargs) if into is None else into
        if into is not None:
            cls.__init__(into, **kwargs)
        searcher.constants = dict(space.constants)
        return searcher

    def set_search_properties(self, metric: Any, mode: Any, config: dict[str, Any], **spec: Any) -> bool:
        """Take ``tune.Tuner``'s ``metric``, ``mode`` and ``param_space``, as Ray's own searchers do.

        A searcher from :meth:`from_param_space` without a space builds its problem from
        ``config`` here. One built with a problem takes a ``metric``/``mode`` that agrees with
        the problem's goals (a missing one is the problem's), refuses one that contradicts
        them in one line naming both, and returns ``False`` on a ``config`` holding samplers
        (Ray then says the searcher has a space already); constants pass to the trainable.
        """
        deferred = self._deferred
        if deferred is not None:
            task_keys, arguments = deferred
            space = space_from_ray(config, metric or self._metric, mode or self._mode, task_keys=task_keys)
            type(self)._build(space, arguments, into=self)
            self._deferred = None
            return True
        self._metric, self._mode = ray_mode(
            self.problem,
            metric or self._metric,
            mode if metric is not None or mode is not None else self._mode,
            self.multiobjective,
        )
        return not any(has_samplers(value) for value in config.values())

    def results(self) -> TuningSession:
        """The session; a searcher still waiting for ``tune.Tuner``'s ``param_space`` has none yet (refused)."""
        if self._deferred is not None:
            raise InvalidInputError(
                "param_space",
                f"{type(self).__name__}.from_param_space() got no param_space: give tune.Tuner(param_space=...)",
            )
        return self.session

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """The flat config (task and tuning parameters) of the next trial.

        When no new valid configuration is left (a small discrete space
        fully explored), the search is ``Searcher.FINISHED``.
        """
        session = self.results()
        given = self.points_left[0] if self.points_left else None
        trial = ask_for_ray(session, trial_id, given)
        if not isinstance(trial, Trial):
            return trial
        if given is not None:
            self.points_left.pop(0)
        return {**self.constants, **trial.task, **trial.config}

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        """Persist the trial's last result (or its failure) and fold it into the engine."""
        if trial_id not in self.session.pending:
            return
        if error or result is None:
            self.session.tell(trial_id, failure="trial raised an error" if error else "trial reported nothing")
            return
        outputs = {name: result[name] for name in self.problem.objectives if name in result}
        record = self.session.tell(trial_id, outputs, additional_output=_scalars(result, exclude=outputs))
        warn_failed(trial_id, record, result, self.problem.objectives)

    def _not_given(self, points: list[GivenPoint]) -> list[GivenPoint]:
        """``points`` less those the session's ledger holds as handed out (a restored run gives none twice)."""
        if not points:
            return points
        handed = {
            t.provenance.model_extra.get("point") for t in self.session.asked_trials() if t.provenance.model_extra
        }
        return [p for p in points if p.number not in handed]

    def save(self, checkpoint_path: str) -> None:
        """Save the session id (the ledger holds the trials in flight, the store every finished one)."""
        with open(checkpoint_path, "w", encoding="utf-8") as fh:
            json.dump({"session_id": self.session.session_id}, fh)

    def restore(self, checkpoint_path: str) -> None:
        """Resume the saved session: the engine replays the store, the trials in flight are adopted.

        Ray reruns unfinished trials after ``Tuner.restore``; adopting them
        means their results are recorded rather than dropped, and the
        engine treats them as pending rather than suggesting them again.
        """
        with open(checkpoint_path, encoding="utf-8") as fh:
            state = json.load(fh)
        self.session = TuningSession.resume(
            self.problem,
            fresh_engine(self.session.engine),
            self.store,
            self.session.problem_name,
            **{**self._session_options, "session_id": state.get("session_id") or self.session.session_id},
        )
        self.points_left = self._not_given(self.points_left)
        log.info(
            "restored searcher %s: %d evaluations replayed, %d trials in flight adopted",
            self.session.session_id,
            len(self.session.records),
            len(self.session.pending),
        )


def registered_engine(
    name: str,
    problem: ProblemSpace,
    tasks: Sequence[Mapping[str, Any]],
    seed: int | None,
    metric: str | list[str] | None,
    engine_options: Mapping[str, Any] | None,
    *,
    executor: Executor | None = None,
    source: Any = None,
) -> Engine:
    """The engine registered as ``name``, built as a searcher asks for it (see :func:`raytuner.engines.build_engine`).

    One metric named by Ray is the engine's ``objective``; ``engine_options`` are
    checked against the engine's option names, and a bad one is refused in one line
    that names ``engine_options``.

    Args:
        name: The engine's registered name (:data:`raytuner.engines.ENGINES`).
        problem: The problem's spaces.
        tasks: The tasks to tune.
        seed: The engine's seed.
        metric: The searcher's metric (one name: the engine tunes that objective alone).
        engine_options: The engine's keyword options (default: none).
        executor: Runs the engine's model fits (default: the engine's own choice).
        source: Source data the engine transfers from or learns beside its tasks.

    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> registered_engine("mla", ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}], 0, None, {"n_initial": 2}).n_initial
    2
    >>> registered_engine("mla", ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}], 0, None, {"n_intial": 2})
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: engine_options: mla takes no option 'n_intial' (allowed: ...)
    """
    options = dict(engine_options or {})
    if "objective" in options:
        raise InvalidInputError("engine_options", "objective is the searcher's metric: pass metric instead")
    if isinstance(metric, str):
        options["objective"] = metric
    try:
        return build_engine(EngineSpec(name, options), problem, tasks, seed, executor=executor, source=source)
    except InvalidInputError as exc:
        if exc.field != "options":
            raise
        raise InvalidInputError("engine_options", exc.reason, exc.allowed) from None


def _scalars(result: Mapping[str, Any], exclude: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-friendly scalar entries of a Ray result, for ``additional_output``."""
    keep = ("training_iteration", "time_total_s", "time_this_iter_s")
    return {k: result[k] for k in keep if k in result and k not in exclude}


class RandomSearcher(EngineSearcher):
    """Random search over a problem's valid configurations, for several tasks at once.

    Args:
        problem: The problem's spaces.
        tasks: The tasks to tune.
        store: A :class:`~raytuner.store.HistoryStore` or where to open one.
        problem_name: The problem's name in the store.
        metric: The objective Ray reports (default: the first objective).
        mode: Ray's ``"min"``/``"max"`` (follows the objective's goal).
        seed: The random seed.
        **session_options: Options of the :class:`~raytuner.session.tuning_session.TuningSession`.
    """

    def __init__(
        self,
        problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]],
        store: HistoryStore | str | os.PathLike[str],
        problem_name: str,
        metric: str | None = None,
        mode: str | None = None,
        seed: int | None = None,
        **session_options: Any,
    ) -> None:
        super().__init__(
            problem,
            RandomSearch(problem, tasks, seed=seed),
            store,
            problem_name,
            metric=metric,
            mode=mode,
            **session_options,
        )
