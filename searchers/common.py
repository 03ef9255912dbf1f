"""What the Ray Tune faces share: Ray's metric modes, asking a session in Ray's terms.

The searchers (``raytuner.searchers``) and the GPTuneBand scheduler
(``raytuner.schedulers``) import this module; it imports neither.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> ray_mode(ProblemSpace.parse(DEMO_PROBLEM), None, None)
    ('y', 'min')
    >>> ray_mode(ProblemSpace.parse(DEMO_PROBLEM), None, "max")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: mode: 'max' contradicts the objective 'y', which is to minimize (allowed: min)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ray.tune.result import AUTO_RESULT_KEYS
from ray.tune.search import Searcher

from raytuner.engines.base import task_key
from raytuner.errors import AwaitingResults, InfeasibleSpaceError, InvalidInputError, TuningFinished
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import Trial, TuningSession

__all__ = [
    "RAY_MODES",
    "ray_mode",
    "one_or_all",
    "ask_for_ray",
    "GivenPoint",
    "given_points",
    "extra_outputs",
    "warn_failed",
    "SessionResults",
]

log = logging.getLogger(__name__)

#: An objective's goal as Ray Tune's ``mode``.
RAY_MODES = {"minimize": "min", "maximize": "max"}


def ray_mode(
    problem: ProblemSpace, metric: str | list[str] | None, mode: str | list[str] | None, multiobjective: bool = False
) -> tuple[Any, Any]:
    """The Ray ``(metric, mode)`` of ``problem``'s objectives; a contradicting ``mode`` is an error.

    One objective gives strings, as Ray Tune's searchers take them; a face
    that tunes several objectives (``multiobjective``) gets lists in the same order (a list of
    ``metric``, or by default every optimised output of a multi-objective
    problem), as Ray Tune's ``OptunaSearch`` takes them.

    Args:
        problem: The problem whose objectives are tuned.
        metric: An objective's name, a list of them (``None``: the first objective, or every
            optimised one when there are several).
        mode: Ray's ``"min"`` or ``"max"`` (a list for a list of metrics) as the caller gave it
            (``None``: from the goals).
        multiobjective: the face tunes several objectives at once (else one: by default the first).

    >>> from raytuner.problem.space import ProblemSpace
    >>> two = ProblemSpace.parse({"parameter_space": [{"name": "x", "type": "real", "lower_bound": 0,
    ...     "upper_bound": 1}], "output_space": [{"name": "time"}, {"name": "acc", "goal": "maximize"}]})
    >>> ray_mode(two, None, None, multiobjective=True), ray_mode(two, ["acc", "time"], ["max", "min"], multiobjective=True)
    ((['time', 'acc'], ['min', 'max']), (['acc', 'time'], ['max', 'min']))
    >>> ray_mode(two, None, None)
    ('time', 'min')
    """
    if isinstance(metric, (list, tuple)) and not multiobjective:
        raise InvalidInputError(
            "metric", f"{list(metric)!r}: this face tunes one objective", allowed=[o.name for o in problem.optimised]
        )
    if not (multiobjective and (isinstance(metric, (list, tuple)) or (metric is None and len(problem.optimised) > 1))):
        if isinstance(mode, (list, tuple)):
            raise InvalidInputError("mode", f"a list of modes for the single metric {metric!r}", allowed=["min", "max"])
        assert not isinstance(metric, (list, tuple))  # a list was refused above, or multiobjective took this elsewhere
        optimised = [o.name for o in problem.optimised]
        if metric is not None and metric not in optimised:
            raise InvalidInputError(
                "metric", f"{metric!r} (mode {mode!r}) is not an optimised output of the problem", allowed=optimised
            )
        objective = problem.objective(metric)
        expected = RAY_MODES[objective.goal]
        if mode is not None and mode != expected:
            raise InvalidInputError(
                "mode",
                f"{mode!r} contradicts the objective {objective.name!r}, which is to {objective.goal}",
                allowed=[expected],
            )
        return objective.name, expected
    names = list(metric) if metric is not None else [o.name for o in problem.optimised]
    optimised = [o.name for o in problem.optimised]
    for i, name in enumerate(names):
        if name not in optimised:
            raise InvalidInputError(f"metric[{i}]", f"{name!r} is not an optimised output", allowed=optimised)
    expected_modes = [RAY_MODES[problem.objective(n).goal] for n in names]
    if mode is not None and list(mode if isinstance(mode, (list, tuple)) else [mode]) != expected_modes:
        raise InvalidInputError("mode", f"{mode!r} contradicts the objectives' goals", allowed=expected_modes)
    return names, expected_modes


def one_or_all(
    problem: ProblemSpace, metric: str | list[str] | None, mode: str | list[str] | None
) -> tuple[list[str], list[str]]:
    """The metrics and modes of a face that tunes one objective or every one (GPTuneBand's scheduler).

    A list of metrics must name every optimised output (in any order);
    ``None`` means every one; a single name means that one alone.

    Args:
        problem: The problem.
        metric: As for :func:`ray_mode` with ``multiobjective``.
        mode: As for :func:`ray_mode` with ``multiobjective``.

    >>> from raytuner.problem.space import ProblemSpace
    >>> two = ProblemSpace.parse({"parameter_space": [{"name": "x", "type": "real", "lower_bound": 0,
    ...     "upper_bound": 1}], "output_space": [{"name": "time"}, {"name": "acc", "goal": "maximize"}]})
    >>> one_or_all(two, None, None), one_or_all(two, "acc", None)
    ((['time', 'acc'], ['min', 'max']), (['acc'], ['max']))
    """
    names, modes = ray_mode(problem, metric, mode, multiobjective=True)
    if isinstance(names, str):
        return [names], [modes]
    if sorted(names) != sorted(o.name for o in problem.optimised):
        raise InvalidInputError(
            "metric",
            f"{names!r}: this face tunes one objective or all of them",
            allowed=[o.name for o in problem.optimised],
        )
    return list(names), list(modes)


_RAY_KEYS = frozenset(AUTO_RESULT_KEYS) | {"done", "trial_id", "experiment_id", "experiment_tag", "should_checkpoint"}
_KEEP = ("training_iteration", "time_total_s", "hostname", "pid")


def extra_outputs(result: Mapping[str, Any], objectives: Sequence[str]) -> dict[str, Any]:
    """What a trial reported besides the objectives (its own scalars, and where and how long it ran).

    Args:
        result: the trial's result.
        objectives: the outputs recorded as such.

    >>> extra_outputs({"y": 1.0, "k": 3, "pid": 7, "done": True, "config/x": 0.2}, ["y"])
    {'k': 3, 'pid': 7}
    """
    own = {
        k: v
        for k, v in result.items()
        if k not in _RAY_KEYS
        and k not in objectives
        and not k.startswith("config/")
        and isinstance(v, (str, int, float, bool))
    }
    return {**own, **{k: result[k] for k in _KEEP if k in result}}


def warn_failed(trial_id: str, record: Any, result: Mapping[str, Any] | None, objectives: Sequence[str]) -> None:
    """Say on the console, in one warning line, that a trial's result made a failed record.

    Ray itself says a trial that raised (it logs the error and keeps it in
    ``ResultGrid.errors``); a trial that *reported* NaN, an infinite value,
    text or no objective ends normally for Ray, so this line is where a user
    sees it, as Ray's ``OptunaSearch`` warns of a failed Optuna trial.

    Args:
        trial_id: Ray's trial id.
        record: The record the session wrote (a ``FunctionEvaluation``).
        result: What the trial reported (``None``: nothing).
        objectives: The problem's objectives, named in the line with the values reported.

    >>> from raytuner.problem.records import FunctionEvaluation
    >>> record = FunctionEvaluation.create({}, {"x": 0.5}, {"y": float("nan")})
    >>> warn_failed("t1", record, {"y": float("nan")}, ["y"])  # logs: trial t1 failed: ... 'y'=nan
    """
    if record.status != "failed":
        return
    values = ", ".join(f"{name!r}={result.get(name)!r}" for name in objectives) if result else "nothing"
    log.warning("trial %s failed: %s (reported %s)", trial_id, record.raytuner.failure_message, values)


class GivenPoint(NamedTuple):
    """One configuration of a searcher's ``points_to_evaluate``, for one task (see :func:`given_points`)."""

    #: Its place among the expanded points (a point for every task counts once per task).
    number: int
    #: The name bad input is reported under: ``points_to_evaluate[i]``.
    field: str
    task: dict[str, Any]
    config: dict[str, Any]


def given_points(
    problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]], points: Sequence[Mapping[str, Any]] | None
) -> list[GivenPoint]:
    """Ray's ``points_to_evaluate``, checked against ``problem`` and expanded per task, in order.

    A point names every tuning parameter. One that names the task parameters runs on that task
    (one of ``tasks``); one that names none runs on every task, in ``tasks``' order. Keys that are
    neither are refused, as are partial points, in one line naming ``points_to_evaluate[i].key``.

    Args:
        problem: The problem's spaces.
        tasks: The searcher's tasks.
        points: The configurations to suggest first (``None``: none).

    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> [(g.task, g.config) for g in given_points(problem, [{"t": 1.0}, {"t": 2.0}], [{"x": 0.5}])]
    [({'t': 1.0}, {'x': 0.5}), ({'t': 2.0}, {'x': 0.5})]
    """
    task_names = set(problem.input_space.names)
    known = {task_key(t) for t in tasks}
    out: list[GivenPoint] = []
    for i, point in enumerate(points or ()):
        field = f"points_to_evaluate[{i}]"
        if not isinstance(point, Mapping):
            raise InvalidInputError(field, f"expected a dict of parameter values, got {type(point).__name__}")
        task = {k: v for k, v in point.items() if k in task_names}
        config = problem.parameter_space.check({k: v for k, v in point.items() if k not in task_names}, field)
        if task:
            checked = problem.input_space.check(task, field)
            if task_key(checked) not in known:
                raise InvalidInputError(field, f"task {checked} is not one of the searcher's", allowed=list(tasks))
            on = [checked]
        else:
            on = [dict(t) for t in tasks]
        for t in on:
            problem.check(t, config)
            out.append(GivenPoint(len(out), field, t, config))
    return out


def ask_for_ray(session: TuningSession, trial_id: str, given: GivenPoint | None = None) -> Trial | str | None:
    """``session.ask`` in Ray's terms: the trial, ``None`` while results are awaited, or ``Searcher.FINISHED``.

    The search is finished when the engine's plan is done or no new valid
    configuration is left (a small discrete space fully explored); the
    session's count of evaluations and of failed ones is then logged (a
    warning when some failed), the run's summary.

    Args:
        session: The session to ask.
        trial_id: Ray's trial id (the session's trial id too).
        given: A point of ``points_to_evaluate`` to hand out (:meth:`TuningSession.give`) instead of asking.
    """
    try:
        if given is not None:
            return session.give(given.task, given.config, trial_id, given.field, point=given.number)
        return session.ask(trial_id=trial_id)
    except AwaitingResults:
        return None
    except (InfeasibleSpaceError, TuningFinished) as exc:
        log.info("nothing left to suggest (%s); the search is finished", exc)
        failed = sum(r.status == "failed" for r in session.records)
        (log.warning if failed else log.info)(
            "search of %s finished: %d evaluations, %d failed", session.problem_name, len(session.records), failed
        )
        return Searcher.FINISHED


class SessionResults:
    """A Ray face's results, as every face answers them: its session's (:meth:`TuningSession.best
    <raytuner.session.tuning_session.TuningSession.best>`; GPTuneBand's count at ``b_max`` only).

    A face (a searcher, the GPTuneBand scheduler) names its session by :meth:`results`.
    """

    def results(self) -> TuningSession:
        """The session that holds this face's results."""
        raise NotImplementedError(f"{type(self).__name__} names no session")

    def best(self, task: Mapping[str, Any] | None = None, objective: str | None = None) -> FunctionEvaluation | None:
        """The best evaluation of ``task`` (default: the first), or ``None`` while none counts.

        Args:
            task: One of the tasks (default: the first).
            objective: The objective's name (default: the one tuned).
        """
        return self.results().best(task, objective)

    def best_per_task(self, objective: str | None = None) -> list[FunctionEvaluation | None]:
        """Per task, :meth:`best` (``None`` where none counts yet), in the engine's order.

        Args:
            objective: The objective's name (default: the one tuned).
        """
        return self.results().best_per_task(objective)
