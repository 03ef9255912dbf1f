"""Ray Tune's ``param_space`` as a raytuner problem: every searcher takes one, as Ray's own searchers do.

A raytuner searcher built without a problem (``Searcher.from_param_space()``)
builds its :class:`~raytuner.problem.space.ProblemSpace` from the
``param_space`` that ``tune.Tuner`` hands it, with the ``metric`` and ``mode``
of ``tune.TuneConfig`` as the objective and its goal. Built with
``from_param_space(param_space, ...)`` it does the same at once.

How each entry maps:

==========================================  ===============================================
``param_space`` entry                        raytuner parameter
==========================================  ===============================================
``tune.uniform(a, b)``                       real on ``[a, b]``
``tune.loguniform(a, b)``                    real on ``[a, b]``, log-scaled
``tune.quniform(a, b, q)``                   categorical of ``a, a+q, ..., b`` (at most 256)
``tune.randint(a, b)``                       integer on ``[a, b - 1]`` (Ray's upper is exclusive)
``tune.lograndint(a, b)``                    integer on ``[a, b - 1]``, log-scaled
``tune.choice([...])``                       categorical
a key named in ``task_keys``                 a **task parameter**: its tasks are the values of
                                             ``tune.grid_search([...])``, ``tune.choice([...])``
                                             or a single plain value
a plain value, or a dict of plain values     a constant: passed to the trainable unchanged
==========================================  ===============================================

Anything else (``tune.grid_search`` on a key that is not a task key, ``tune.randn``,
``tune.sample_from``, a sampler inside a nested dict) is refused in one line that
names the key. Trial configs stay flat: task and tuning parameters side by side.

Example (the ``tune.Tuner`` form; ``t`` is the task parameter, two tasks tuned together):
    >>> import tempfile
    >>> from ray import tune
    >>> from raytuner.searchers import LCMSearcher
    >>> searcher = LCMSearcher.from_param_space(
    ...     task_keys=["t"], store=tempfile.mkdtemp(), problem_name="demo", seed=0,
    ...     engine_options={"n_initial": 3})
    >>> param_space = {"t": tune.grid_search([1.0, 2.0]), "x": tune.uniform(0, 1),
    ...                "n": tune.randint(1, 9), "alg": tune.choice(["lu", "qr"]), "scale": 3.0}
    >>> def trainable(config):
    ...     tune.report({"y": config["scale"] * (config["x"] - 0.1 * config["t"]) ** 2 + config["n"]})
    >>> tuner = tune.Tuner(trainable, param_space=param_space, tune_config=tune.TuneConfig(
    ...     search_alg=searcher, metric="y", mode="min", num_samples=8))
    >>> best = tuner.fit().get_best_result()  # doctest: +SKIP
    >>> best.config["x"] == searcher.best({"t": best.config["t"]}).parameters["x"]  # doctest: +SKIP
    True

Or build the searcher at once from a ``param_space`` (``metric`` and ``mode`` then required):

    >>> s = LCMSearcher.from_param_space({"t": tune.grid_search([1.0, 2.0]), "x": tune.uniform(0, 1)},
    ...     task_keys=["t"], metric="y", mode="max", store=tempfile.mkdtemp(), problem_name="demo")
    >>> s.problem.objective("y").goal, s.session.engine.tasks
    ('maximize', [{'t': 1.0}, {'t': 2.0}])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ray.tune.search import sample

from raytuner.errors import InvalidInputError
from raytuner.problem.space import ProblemSpace

__all__ = ["RaySpace", "space_from_ray", "GOALS", "has_samplers"]

#: Ray's ``mode`` as an objective's goal.
GOALS = {"min": "minimize", "max": "maximize"}

#: The most values a ``tune.quniform`` may have (it becomes a categorical parameter).
MAX_QUANTIZED = 256

_ALLOWED = [
    "tune.uniform",
    "tune.loguniform",
    "tune.quniform",
    "tune.randint",
    "tune.lograndint",
    "tune.choice",
    "a constant",
    "tune.grid_search on a task key",
]


@dataclass(frozen=True)
class RaySpace:
    """A ``param_space`` read as a raytuner problem.

    Attributes:
        problem: The problem (task parameters, tuning parameters, the one objective).
        tasks: The tasks to tune (``[{}]`` without task keys).
        constants: The keys passed through to the trainable unchanged.
    """

    problem: ProblemSpace
    tasks: list[dict[str, Any]]
    constants: dict[str, Any] = field(default_factory=dict)


def has_samplers(value: Any) -> bool:
    """Whether ``value`` (a ``param_space`` entry) holds a Ray sampler or grid anywhere.

    Args:
        value: The entry (a sampler, a ``{"grid_search": [...]}``, a nested dict or a constant).

    >>> from ray import tune
    >>> has_samplers({"a": {"b": tune.uniform(0, 1)}}), has_samplers({"a": [1, 2]})
    (True, False)
    """
    if isinstance(value, sample.Domain):
        return True
    if isinstance(value, Mapping):
        return "grid_search" in value or any(has_samplers(v) for v in value.values())
    return False


def _values(name: str, spec: Any, lists_as_choices: bool) -> list[Any] | None:
    """The values of a choice, a grid, a single constant or (``lists_as_choices``) a list; else ``None``."""
    if isinstance(spec, sample.Categorical):
        return list(spec.categories)
    if isinstance(spec, Mapping) and "grid_search" in spec:
        return list(spec["grid_search"])
    if lists_as_choices and isinstance(spec, (list, tuple)):
        return list(spec)
    return None


def _parameter(name: str, spec: Any, lists_as_choices: bool) -> dict[str, Any] | None:
    """The raytuner parameter of one ``param_space`` entry (``None``: a constant)."""
    values = _values(name, spec, lists_as_choices)
    if isinstance(spec, Mapping) and "grid_search" in spec:
        raise InvalidInputError(
            f"param_space.{name}",
            "tune.grid_search is for task keys (name it in task_keys) or use tune.choice",
            allowed=_ALLOWED,
        )
    if values is not None:
        if not values:
            raise InvalidInputError(f"param_space.{name}", "an empty choice", allowed=_ALLOWED)
        return {"name": name, "type": "categorical", "categories": values}
    if not isinstance(spec, sample.Domain):
        if has_samplers(spec):
            raise InvalidInputError(
                f"param_space.{name}", "a sampler inside a nested value (configs are flat)", allowed=_ALLOWED
            )
        return None
    sampler = spec.get_sampler()
    q = getattr(sampler, "q", None)
    base = getattr(sampler, "sampler", sampler)
    log = isinstance(base, sample.LogUniform)
    if not isinstance(base, (sample.Uniform, sample.LogUniform)):
        raise InvalidInputError(f"param_space.{name}", f"unsupported sampler {spec!r}", allowed=_ALLOWED)
    if isinstance(spec, sample.Float):
        if q is None:
            return {"name": name, "type": "real", "lower_bound": spec.lower, "upper_bound": spec.upper, "log": log}
        count = int(round((spec.upper - spec.lower) / q)) + 1
        if log or count > MAX_QUANTIZED:
            raise InvalidInputError(
                f"param_space.{name}",
                f"a quantised real needs a linear scale and at most {MAX_QUANTIZED} values, got {count}",
                allowed=_ALLOWED,
            )
        return {"name": name, "type": "categorical", "categories": [spec.lower + i * q for i in range(count)]}
    if isinstance(spec, sample.Integer) and q in (None, 1):
        return {"name": name, "type": "integer", "lower_bound": spec.lower, "upper_bound": spec.upper - 1, "log": log}
    raise InvalidInputError(f"param_space.{name}", f"unsupported sampler {spec!r}", allowed=_ALLOWED)


def _task_parameter(name: str, values: Sequence[Any]) -> dict[str, Any]:
    """A task parameter spanning ``values`` (several numbers: their range; else categories)."""
    if len(set(values)) > 1 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        kind = "integer" if all(isinstance(v, int) for v in values) else "real"
        return {"name": name, "type": kind, "lower_bound": min(values), "upper_bound": max(values)}
    return {"name": name, "type": "categorical", "categories": list(dict.fromkeys(values))}


def space_from_ray(
    param_space: Mapping[str, Any],
    metric: str | None,
    mode: str | None,
    *,
    task_keys: Sequence[str] = (),
    constraints: Mapping[str, str] | None = None,
    lists_as_choices: bool = False,
) -> RaySpace:
    """The problem, tasks and constants of a Ray ``param_space`` (see the module's table).

    Args:
        param_space: Ray's search space (``tune.Tuner``'s ``param_space``).
        metric: The objective's name (required).
        mode: ``"min"`` or ``"max"``: the objective's goal (required).
        task_keys: The keys that are task parameters; their values (``tune.grid_search``,
            ``tune.choice`` or one plain value) are the tasks, every combination of them tuned.
        constraints: Named expressions a valid configuration meets.
        lists_as_choices: A plain list is a choice (``DiscreteBOSearcher.from_choices``), not a constant.

    >>> from ray import tune
    >>> s = space_from_ray({"t": tune.grid_search([1, 2]), "x": tune.loguniform(1e-3, 1), "k": 4}, "y", "max",
    ...                    task_keys=["t"])
    >>> s.tasks, s.constants, s.problem.parameter_space.names, s.problem.objective("y").goal
    ([{'t': 1}, {'t': 2}], {'k': 4}, ['x'], 'maximize')
    >>> space_from_ray({"x": tune.uniform(0, 1)}, "y", "up")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: mode: 'up' for metric 'y' is not Ray's (allowed: min, max)
    """
    if not metric or not isinstance(metric, str):
        raise InvalidInputError("metric", f"{metric!r}: give the one objective's name (TuneConfig(metric=...))")
    if mode not in GOALS:
        raise InvalidInputError("mode", f"{mode!r} for metric {metric!r} is not Ray's", allowed=list(GOALS))
    missing = [k for k in task_keys if k not in param_space]
    if missing:
        raise InvalidInputError("task_keys", f"{missing[0]!r} is not a key of param_space", allowed=list(param_space))
    task_values: dict[str, list[Any]] = {}
    parameters: list[dict[str, Any]] = []
    constants: dict[str, Any] = {}
    for name, spec in param_space.items():
        if name in task_keys:
            values = _values(name, spec, True)
            if values is None and has_samplers(spec):
                raise InvalidInputError(
                    f"param_space.{name}",
                    "a task key takes tune.grid_search, tune.choice or one value",
                    allowed=["tune.grid_search([...])", "tune.choice([...])", "a constant"],
                )
            task_values[name] = values if values is not None else [spec]
        elif (parameter := _parameter(name, spec, lists_as_choices)) is not None:
            parameters.append(parameter)
        else:
            constants[name] = spec
    if not parameters:
        raise InvalidInputError("param_space", "no tuning parameter (only constants and task keys)", allowed=_ALLOWED)
    if metric in param_space:
        raise InvalidInputError("metric", f"{metric!r} is a key of param_space, not an output")
    problem = ProblemSpace.parse(
        {
            "input_space": [_task_parameter(name, values) for name, values in task_values.items()],
            "parameter_space": parameters,
            "output_space": [{"name": metric, "goal": GOALS[mode]}],
            "constraints": dict(constraints or {}),
        }
    )
    tasks: list[dict[str, Any]] = [{}]
    for name, values in task_values.items():
        tasks = [{**task, name: value} for task in tasks for value in values]
    return RaySpace(problem, tasks, constants)
