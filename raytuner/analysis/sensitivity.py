"""Sobol sensitivity analysis of a surrogate model, and search-space reduction.

GPTuneCrowd's QuerySensitivityAnalysis (paper 000, sections IV and VI-D/E):
fit a surrogate to the crowd's function evaluations
(:func:`~raytuner.analysis.surrogate.surrogate_from_records`), draw a
Saltelli sample of the parameter space with SALib, evaluate the surrogate's
mean on it (all rows in one vectorised prediction) and let SALib's Sobol
analysis attribute the variance of the prediction to the parameters: the
first-order index S1 (the effect of a parameter alone) and the total index
ST (its effect including every interaction), each with a confidence
interval. The sample lives in the unit cube of the parameter space and goes
through the space's own encoding: an integer or categorical parameter takes
the value whose bin a coordinate falls in, so it is sampled uniformly over
its values. :func:`reduce_space` then keeps the parameters that matter and
fixes the others at default values (Tables IV and V, Figures 6 and 7).

Example:
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.problem.sampling import sample_configurations
    >>> from raytuner.problem.space import ProblemSpace
    >>> problem = ProblemSpace.parse({"parameter_space": [
    ...     {"name": "a", "type": "real", "lower_bound": 0, "upper_bound": 1},
    ...     {"name": "b", "type": "real", "lower_bound": 0, "upper_bound": 1}]})
    >>> configs = sample_configurations(problem, {}, 20, seed=0)
    >>> records = [FunctionEvaluation.create({}, c, {"y": 4 * c["a"] + 0.01 * c["b"]}) for c in configs]
    >>> model = surrogate_from_records(problem, records, executor=InlineExecutor())
    >>> result = sobol_analysis(model, num_samples=256, seed=0)
    >>> round(result.ST["a"], 2), round(result.ST["b"], 2)
    (1.0, 0.0)
    >>> reduced, fixed = reduce_space(problem, result, threshold=0.05, defaults={"b": 0.5})
    >>> reduced.parameter_space.names, fixed
    (['a'], {'b': 0.5})
"""

from __future__ import annotations

import ast
import inspect
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from raytuner.analysis.surrogate import SurrogateModel, surrogate_from_records
from raytuner.errors import InvalidInputError
from raytuner.problem.constraints import Constraint
from raytuner.problem.space import Categorical, Integer, Parameter, ProblemSpace, Space

__all__ = [
    "SensitivityResult",
    "sobol_analysis",
    "reduce_space",
    "SOBOL_INDICES",
    "surrogate_from_records",
    "check_num_samples",
]

log = logging.getLogger(__name__)

#: Index names :func:`reduce_space` can rank by.
SOBOL_INDICES: tuple[str, ...] = ("S1", "ST")

SobolIndex = Literal["S1", "ST"]


def _describe(parameter: Parameter) -> tuple[str, str]:
    """The (type, range) columns of a parameter in the papers' tables."""
    if isinstance(parameter, Categorical):
        return "Categorical", f"{len(parameter.categories)} choices"
    kind = "Integer" if isinstance(parameter, Integer) else "Real"
    return kind, f"[{parameter.lower_bound:g},{parameter.upper_bound:g}]"


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


@dataclass
class SensitivityResult:
    """Sobol indices of each parameter (dicts keyed by parameter name).

    ``S2`` and ``S2_conf`` hold the second-order indices of each pair
    ``(first, second)`` (first before second in parameter order) when they
    were asked for, else ``None``. ``num_samples`` is SALib's base sample
    size N, ``num_evaluations`` the number of surrogate predictions
    (``N (d + 2)``, or ``N (2 d + 2)`` with second-order indices).

    >>> r = SensitivityResult(["x"], ["Real"], ["[0,1]"], {"x": 0.9}, {"x": 0.01}, {"x": 1.0}, {"x": 0.02})
    >>> r.to_dict()["indices"]["x"]
    {'S1': 0.9, 'S1_conf': 0.01, 'ST': 1.0, 'ST_conf': 0.02}
    """

    parameters: list[str]
    types: list[str]
    ranges: list[str]
    S1: dict[str, float]
    S1_conf: dict[str, float]
    ST: dict[str, float]
    ST_conf: dict[str, float]
    S2: dict[tuple[str, str], float] | None = None
    S2_conf: dict[tuple[str, str], float] | None = None
    objective: str = "y"
    task: dict[str, Any] = field(default_factory=dict)
    num_samples: int = 0
    num_evaluations: int = 0
    seed: int | None = None
    seconds: float = 0.0

    def index(self, name: str) -> dict[str, float]:
        """The index named ``name`` (``"S1"`` or ``"ST"``) of every parameter.

        Args:
            name: ``"S1"`` or ``"ST"``.
        """
        if name not in SOBOL_INDICES:
            raise InvalidInputError("index", f"unknown Sobol index {name!r}", allowed=SOBOL_INDICES)
        return getattr(self, name)

    def important(self, threshold: float, index: SobolIndex = "ST") -> list[str]:
        """The parameters whose ``index`` is at least ``threshold``, in parameter order.

        Args:
            threshold: the smallest index value kept.
            index: ``"ST"`` (default) or ``"S1"``.
        """
        values = self.index(index)
        return [p for p in self.parameters if math.isfinite(values[p]) and values[p] >= threshold]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (non-finite indices become ``None``)."""
        indices = {
            p: {
                "S1": _number(self.S1[p]),
                "S1_conf": _number(self.S1_conf[p]),
                "ST": _number(self.ST[p]),
                "ST_conf": _number(self.ST_conf[p]),
            }
            for p in self.parameters
        }
        out: dict[str, Any] = {
            "method": "sobol",
            "objective": self.objective,
            "task": dict(self.task),
            "num_samples": self.num_samples,
            "num_evaluations": self.num_evaluations,
            "seed": self.seed,
            "parameters": [
                {"name": p, "type": t, "range": r} for p, t, r in zip(self.parameters, self.types, self.ranges)
            ],
            "indices": indices,
        }
        if self.S2 is not None and self.S2_conf is not None:
            out["S2"] = [
                {"parameters": [a, b], "S2": _number(v), "S2_conf": _number(self.S2_conf[(a, b)])}
                for (a, b), v in self.S2.items()
            ]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SensitivityResult:
        """The result :meth:`to_dict` wrote (``None`` indices read back as NaN).

        Args:
            data: what :meth:`to_dict` returned.

        >>> r = SensitivityResult(["x"], ["Real"], ["[0,1]"], {"x": 0.9}, {"x": 0.01}, {"x": 1.0}, {"x": 0.02})
        >>> SensitivityResult.from_dict(r.to_dict()) == r
        True
        """

        def value(v: Any) -> float:
            return math.nan if v is None else float(v)

        names = [p["name"] for p in data["parameters"]]
        indices = data["indices"]
        per = {k: {p: value(indices[p][k]) for p in names} for k in ("S1", "S1_conf", "ST", "ST_conf")}
        pairs = data.get("S2")
        return cls(
            names,
            [p["type"] for p in data["parameters"]],
            [p["range"] for p in data["parameters"]],
            S1=per["S1"],
            S1_conf=per["S1_conf"],
            ST=per["ST"],
            ST_conf=per["ST_conf"],
            S2=None if pairs is None else {tuple(e["parameters"]): value(e["S2"]) for e in pairs},
            S2_conf=None if pairs is None else {tuple(e["parameters"]): value(e["S2_conf"]) for e in pairs},
            objective=data.get("objective", "y"),
            task=dict(data.get("task", {})),
            num_samples=int(data.get("num_samples", 0)),
            num_evaluations=int(data.get("num_evaluations", 0)),
            seed=data.get("seed"),
        )

    def table(self, digits: int = 2) -> str:
        """A text table like the papers' Tables IV and V.

        Args:
            digits: decimals of the indices (default 2).

        >>> r = SensitivityResult(["COLPERM", "NREL"], ["Categorical", "Integer"], ["5 choices", "[10,40]"],
        ...                       {"COLPERM": 0.8, "NREL": 0.0}, {"COLPERM": 0.06, "NREL": 0.01},
        ...                       {"COLPERM": 0.86, "NREL": 0.01}, {"COLPERM": 0.07, "NREL": 0.0})
        >>> print(r.table())
        Parameter  Type         Range        S1  S1_conf    ST  ST_conf
        COLPERM    Categorical  5 choices  0.80     0.06  0.86     0.07
        NREL       Integer      [10,40]    0.00     0.01  0.01     0.00
        """
        header = ["Parameter", "Type", "Range", "S1", "S1_conf", "ST", "ST_conf"]
        rows = [
            [p, t, r] + [f"{getattr(self, k)[p]:.{digits}f}" for k in ("S1", "S1_conf", "ST", "ST_conf")]
            for p, t, r in zip(self.parameters, self.types, self.ranges)
        ]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

        def line(cells: list[str]) -> str:
            return "  ".join(
                c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
            ).rstrip()

        return "\n".join(line(r) for r in [header, *rows])


def check_num_samples(num_samples: Any) -> int:
    """``num_samples`` as an int if it is a positive power of two (SALib's Sobol sequence); else one line.

    Args:
        num_samples: the base sample size of a Sobol analysis.

    >>> check_num_samples(1024)
    1024
    """
    if (
        isinstance(num_samples, bool)
        or not isinstance(num_samples, (int, np.integer))
        or num_samples < 1
        or int(num_samples) & (int(num_samples) - 1)
    ):
        raise InvalidInputError(
            "num_samples",
            f"must be a positive power of two (SALib's Sobol sequence "
            f"keeps its balance only then), got {num_samples!r}",
            allowed=[2**k for k in range(6, 15, 2)] + ["..."],
        )
    return int(num_samples)


def sobol_analysis(
    model: SurrogateModel,
    num_samples: int = 4096,
    task: Mapping[str, Any] | int | None = None,
    second_order: bool = False,
    seed: int | None = 0,
    *,
    num_resamples: int = 100,
    conf_level: float = 0.95,
) -> SensitivityResult:
    """Sobol indices of the surrogate's predicted mean over the parameter space, for ``task``.

    ``num_samples`` is SALib's base sample size N, a positive power of two;
    the surrogate is evaluated at ``N (d + 2)`` points (``N (2 d + 2)``
    with ``second_order``), all in one vectorised prediction. ``seed`` seeds
    the scrambled Sobol sequence and the bootstrap of the confidence
    intervals (``num_resamples`` resamples at ``conf_level``).

    Args:
        model: the fitted surrogate (:func:`surrogate_from_records`).
        num_samples: SALib's base sample size N, a positive power of two (default 4096).
        task: the task (parameters or index; default: the model's default task).
        second_order: also compute S2 (default False).
        seed: seeds the Sobol sequence and the bootstrap (default 0).
        num_resamples: bootstrap resamples of the confidence intervals (default 100).
        conf_level: the confidence intervals' level (default 0.95).

    >>> sobol_analysis(None, num_samples=1000)
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: num_samples: must be a positive power of two (SALib's Sobol sequence keeps its balance only then), got 1000 (allowed: 64, 256, 1024, 4096, 16384, ...)
    """
    N = check_num_samples(num_samples)
    if not isinstance(model, SurrogateModel):
        raise InvalidInputError("model", f"expected a SurrogateModel, got {type(model).__name__}")
    if not isinstance(num_resamples, int) or num_resamples < 1:
        raise InvalidInputError("num_resamples", f"must be an integer >= 1, got {num_resamples!r}")
    if not 0 < conf_level < 1:
        raise InvalidInputError("conf_level", f"must lie in (0, 1), got {conf_level!r}")
    # SALib pulls in scipy.stats and pandas (about a second): import it only when analysing
    from SALib.analyze import sobol as sobol_analyze
    from SALib.sample import sobol as sobol_sample

    began = time.perf_counter()
    index = model.task_index(task)
    space = model.problem.parameter_space
    names = space.names
    salib_problem = {"num_vars": len(names), "names": names, "bounds": [[0.0, 1.0]] * len(names)}
    unit = sobol_sample.sample(salib_problem, N, calc_second_order=second_order, scramble=True, seed=seed)
    mean, _ = model.predict(unit, index)  # snapped to the space's bins inside predict
    if not np.all(np.isfinite(mean)):
        raise InvalidInputError("model", "the surrogate predicted non-finite values; cannot analyse them")
    if float(np.var(mean)) <= 1e-24 * max(1.0, float(np.mean(mean)) ** 2):
        log.warning("the surrogate's prediction is constant over the parameter space; every index is 0")
        raw: dict[str, Any] = {
            "S1": np.zeros(len(names)),
            "S1_conf": np.zeros(len(names)),
            "ST": np.zeros(len(names)),
            "ST_conf": np.zeros(len(names)),
        }
        if second_order:
            raw["S2"] = np.where(np.triu(np.ones((len(names),) * 2), 1) > 0, 0.0, np.nan)
            raw["S2_conf"] = raw["S2"].copy()
    else:
        raw = sobol_analyze.analyze(
            salib_problem,
            mean,
            calc_second_order=second_order,
            num_resamples=num_resamples,
            conf_level=conf_level,
            print_to_console=False,
            seed=seed,
        )
    columns = {k: {p: float(v) for p, v in zip(names, raw[k])} for k in ("S1", "S1_conf", "ST", "ST_conf")}
    S2 = S2_conf = None
    if second_order:
        pairs = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
        S2 = {(names[i], names[j]): float(raw["S2"][i, j]) for i, j in pairs}
        S2_conf = {(names[i], names[j]): float(raw["S2_conf"][i, j]) for i, j in pairs}
    described = [_describe(p) for p in space.parameters]
    result = SensitivityResult(
        parameters=names,
        types=[t for t, _ in described],
        ranges=[r for _, r in described],
        S1=columns["S1"],
        S1_conf=columns["S1_conf"],
        ST=columns["ST"],
        ST_conf=columns["ST_conf"],
        S2=S2,
        S2_conf=S2_conf,
        objective=model.objective.name,
        task=dict(model.tasks[index]),
        num_samples=N,
        num_evaluations=len(unit),
        seed=seed,
        seconds=time.perf_counter() - began,
    )
    log.info(
        "Sobol analysis of %r over %d parameters: %d predictions in %.2f s",
        result.objective,
        len(names),
        len(unit),
        result.seconds,
    )
    return result


# -- search-space reduction -----------------------------------------------------------------------------


class _Substitute(ast.NodeTransformer):
    """Replace names of fixed parameters by their values (function names are left alone)."""

    def __init__(self, fixed: Mapping[str, Any]) -> None:
        self.fixed = fixed

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node.args = [self.visit(a) for a in node.args]
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.fixed:
            return ast.copy_location(ast.Constant(self.fixed[node.id]), node)
        return node


def _bind_callable(compiled: Constraint, fixed: Mapping[str, Any]) -> Callable[..., Any]:
    """A callable constraint with the fixed values merged into whatever it is called with.

    Its signature names the constraint's remaining parameters (so that the
    reduced problem checks them) and takes every other value as ``**values``
    (a callable that reads its arguments from ``**kwargs`` still finds the
    fixed parameters there).
    """

    def constraint(**values: Any) -> bool:
        return compiled({**fixed, **values})

    remaining = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in sorted(compiled.names - set(fixed))]
    remaining.append(inspect.Parameter("values", inspect.Parameter.VAR_KEYWORD))
    constraint.__signature__ = inspect.Signature(remaining)  # type: ignore[attr-defined]  # read by inspect.signature
    return constraint


def _reduce_constraint(name: str, spec: Any, fixed: Mapping[str, Any]) -> Any | None:
    """The constraint with fixed values substituted; ``None`` when nothing of it is left to check.

    An expression gets the values written in (it stays a serialisable
    expression); one left without names must hold for the fixed values and
    is dropped. A callable is wrapped so that it receives the fixed values.
    """
    compiled = Constraint.from_spec(name, spec)
    if not fixed:
        return spec
    if not compiled.is_expression:
        return _bind_callable(compiled, fixed)
    if not compiled.names & set(fixed):
        return spec
    assert compiled.source is not None
    tree = _Substitute(fixed).visit(ast.parse(compiled.source.strip(), mode="eval"))
    reduced = ast.unparse(ast.fix_missing_locations(tree))
    if Constraint.from_spec(name, reduced).names:
        return reduced
    if not compiled(fixed):
        raise InvalidInputError(
            f"constraints.{name}", f"violated by the fixed values { {n: fixed[n] for n in sorted(compiled.names)} }"
        )
    return None


def reduce_space(
    problem: ProblemSpace,
    result: SensitivityResult,
    threshold: float = 0.05,
    defaults: Mapping[str, Any] | None = None,
    index: SobolIndex = "ST",
) -> tuple[ProblemSpace, dict[str, Any]]:
    """Keep the parameters whose ``index`` (``"ST"`` or ``"S1"``) is at least ``threshold``; fix the rest.

    Returns the reduced problem (same input and output spaces, only the kept
    tuning parameters) and the fixed values, taken from ``defaults``; every
    dropped parameter needs a default in its domain. Constraints that name a
    fixed parameter get its value substituted (an expression stays a
    serialisable expression); one left with no names at all must hold for
    the fixed values and is then dropped.

    Args:
        problem: the problem to reduce.
        result: its sensitivity analysis.
        threshold: the smallest index value a kept parameter has (default 0.05).
        defaults: the fixed value of each dropped parameter (each in its domain).
        index: ``"ST"`` (default) or ``"S1"``.

    >>> problem = ProblemSpace.parse({"parameter_space": [
    ...     {"name": "nb", "type": "integer", "lower_bound": 1, "upper_bound": 8},
    ...     {"name": "alg", "type": "categorical", "categories": ["lu", "qr"]}],
    ...     "constraints": {"small": "nb <= 4 or alg == 'lu'"}})
    >>> result = SensitivityResult(["nb", "alg"], ["Integer", "Categorical"], ["[1,8]", "2 choices"],
    ...                            {"nb": 0.7, "alg": 0.0}, {"nb": 0.1, "alg": 0.0},
    ...                            {"nb": 0.9, "alg": 0.01}, {"nb": 0.1, "alg": 0.0})
    >>> reduced, fixed = reduce_space(problem, result, 0.05, defaults={"alg": "qr"})
    >>> reduced.parameter_space.names, fixed, reduced.constraints
    (['nb'], {'alg': 'qr'}, {'small': "nb <= 4 or 'qr' == 'lu'"})
    >>> reduce_space(problem, result, 0.05, defaults={"alg": "svd"})
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: defaults.alg: 'svd' is not a category (allowed: lu, qr)
    """
    if index not in SOBOL_INDICES:
        raise InvalidInputError("index", f"unknown Sobol index {index!r}", allowed=SOBOL_INDICES)
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float, np.integer, np.floating))
        or not 0.0 <= float(threshold) <= 1.0
    ):
        raise InvalidInputError(
            "threshold",
            f"must be a number in [0, 1] (Sobol indices are fractions of the output variance), got {threshold!r}",
        )
    space = problem.parameter_space
    if list(result.parameters) != space.names:
        raise InvalidInputError("result", f"analyses parameters {result.parameters}, but the problem has {space.names}")
    defaults = dict(defaults or {})
    for name in defaults:
        if name not in space.names:
            raise InvalidInputError(f"defaults.{name}", "unknown parameter", allowed=space.names)
    values = result.index(index)
    for name in space.names:
        if not math.isfinite(values[name]):
            log.warning("%s of %r is not finite; the parameter counts as unimportant", index, name)
    kept = result.important(float(threshold), index)
    if not kept:
        best = max(space.names, key=lambda n: values[n] if math.isfinite(values[n]) else -math.inf)
        raise InvalidInputError(
            "threshold",
            f"no parameter has {index} >= {threshold:g} (the largest is "
            f"{best} with {values[best]:.3g}); lower the threshold",
        )
    fixed: dict[str, Any] = {}
    for parameter in space.parameters:
        if parameter.name in kept:
            continue
        if parameter.name not in defaults:
            raise InvalidInputError(
                f"defaults.{parameter.name}",
                f"parameter {parameter.name!r} is dropped ({index} = "
                f"{values[parameter.name]:.3g} < {threshold:g}) and needs a default value",
            )
        fixed[parameter.name] = parameter.check(defaults[parameter.name], f"defaults.{parameter.name}")
    constraints: dict[str, Any] = {}
    for name, spec in problem.constraints.items():
        reduced = _reduce_constraint(name, spec, fixed)
        if reduced is not None:
            constraints[name] = reduced
    reduced_problem = ProblemSpace(
        input_space=problem.input_space,
        parameter_space=Space(parameters=[space[n] for n in kept]),
        output_space=problem.output_space,
        constraints=constraints,
    )
    log.info(
        "reduced the parameter space from %d to %d parameters (%s >= %g); fixed %s",
        space.dimension,
        len(kept),
        index,
        threshold,
        fixed,
    )
    return reduced_problem, fixed
