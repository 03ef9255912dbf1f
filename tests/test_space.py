"""Problem spaces: bad input names the field, encoding round-trips, constraints are safe."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from raytuner.errors import InvalidInputError
from raytuner.problem.constraints import Constraint, SafeExpression
from raytuner.problem.space import Categorical, Integer, Objective, ProblemSpace, Real, Space

X = {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        ({"parameter_space": [{**X, "type": "complex"}]}, "parameter_space[0].type", "allowed: real, integer"),
        ({"parameter_space": [{**X, "lower_bound": 2}]}, "parameter_space[0].lower_bound", "below upper_bound"),
        (
            {"parameter_space": [{"name": "i", "type": "int", "lower_bound": 5, "upper_bound": 1}]},
            "parameter_space[0].lower_bound",
            "below upper_bound",
        ),
        (
            {"parameter_space": [{"name": "c", "type": "categorical", "categories": []}]},
            "parameter_space[0].categories",
            "at least one",
        ),
        ({"parameter_space": [X, X]}, "parameter_space", "duplicate parameter name 'x'"),
        ({"input_space": [X], "parameter_space": [X]}, "", "duplicate name 'x'"),
        ({"parameter_space": [X], "constraints": {"c1": "x < zz"}}, "constraints.c1", "unknown parameter 'zz'"),
        ({"parameter_space": [{**X, "log": True}]}, "parameter_space[0].lower_bound", "log-scaled"),
        (
            {"parameter_space": [{"name": "i", "type": "int", "lower_bound": 0.5, "upper_bound": 3}]},
            "parameter_space[0].lower_bound",
            "whole-number",
        ),
        ({"parameter_space": [X], "output_space": []}, "output_space", "at least one objective"),
        (
            {"parameter_space": [X], "output_space": [{"name": "y", "goal": "fastest"}]},
            "output_space[0].goal",
            "'minimize' or 'maximize'",
        ),
    ],
)
def test_bad_problem_raises_one_clear_error(spec: dict, field: str, fragment: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        ProblemSpace.parse(spec)
    assert info.value.field == field
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("build", "field", "fragment"),
    [
        (lambda: Real(name="x", lower_bound=2, upper_bound=1), "lower_bound", "below upper_bound 1"),
        (lambda: Integer(name="n", lower_bound=5, upper_bound=1), "lower_bound", "below upper_bound 1"),
        (lambda: Integer(name="n", lower_bound=0.5, upper_bound=3), "lower_bound", "whole-number"),
        (lambda: Real(name="x", lower_bound=0, upper_bound="one"), "upper_bound", "valid number"),
        (lambda: Categorical(name="c", categories=[]), "categories", "at least one"),
        (lambda: Objective(name="y", lower_bound=3, upper_bound=1), "", "must be below upper_bound"),
        (lambda: Space(parameters=[Real(**X), Real(**X)]), "", "duplicate parameter name 'x'"),
        (lambda: ProblemSpace(parameter_space=[Real(**X)], output_space=[]), "output_space", "at least one"),
        (lambda: ProblemSpace(parameter_space=[{**X, "upper_bound": -1}]), "parameter_space[0].lower_bound", "below"),
    ],
    ids=["real", "integer", "integer-whole", "real-number", "categorical", "objective", "space", "problem", "nested"],
)
def test_a_bad_space_built_in_python_raises_one_line_naming_the_field(build: Any, field: str, fragment: str) -> None:
    # rt.Real(lower_bound=2, upper_bound=1) raised pydantic's multi-line ValidationError, which the CLI reports as a bug
    with pytest.raises(InvalidInputError) as info:
        build()
    assert not isinstance(info.value, ValidationError)
    assert info.value.field == field and fragment in str(info.value) and "\n" not in str(info.value)


def test_unknown_type_lists_the_allowed_types() -> None:
    with pytest.raises(InvalidInputError) as info:
        ProblemSpace.parse({"parameter_space": [{**X, "type": "complex"}]})
    assert info.value.allowed == ["real", "integer (or int)", "categorical"]


@pytest.mark.parametrize(
    ("point", "field", "fragment"),
    [
        ({"x": 1.5, "k": 2, "c": "a"}, "tuning_parameter.x", "outside [0, 1]"),
        ({"x": 0.5, "k": 2.5, "c": "a"}, "tuning_parameter.k", "not an integer"),
        ({"x": 0.5, "k": 2, "c": "z"}, "tuning_parameter.c", "allowed: a, b"),
        ({"x": 0.5, "k": 2}, "tuning_parameter.c", "missing value"),
        ({"x": 0.5, "k": 2, "c": "a", "w": 1}, "tuning_parameter.w", "unknown parameter"),
        ({"x": "0.5", "k": 2, "c": "a"}, "tuning_parameter.x", "not a number"),
        ({"x": math.nan, "k": 2, "c": "a"}, "tuning_parameter.x", "outside"),
    ],
)
def test_value_outside_the_space_names_the_field(point: dict, field: str, fragment: str) -> None:
    space = Space.model_validate(
        [
            X,
            {"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 4},
            {"name": "c", "type": "categorical", "categories": ["a", "b"]},
        ]
    )
    with pytest.raises(InvalidInputError) as info:
        space.check(point, "tuning_parameter")
    assert info.value.field == field
    assert fragment in str(info.value)


def test_problem_check_reports_the_violated_constraint() -> None:
    problem = ProblemSpace.parse(
        {
            "input_space": [{"name": "m", "type": "integer", "lower_bound": 1, "upper_bound": 100}],
            "parameter_space": [{"name": "mb", "type": "integer", "lower_bound": 1, "upper_bound": 16}],
            "constraints": {"fits": "mb * 8 <= m"},
        }
    )
    assert problem.check({"m": 40}, {"mb": 5}) == ({"m": 40}, {"mb": 5})
    with pytest.raises(InvalidInputError, match="constraints.fits"):
        problem.check({"m": 40}, {"mb": 6})


def test_problem_round_trips_through_plain_data() -> None:
    spec = {
        "input_space": [{"name": "t", "type": "int", "lower_bound": 1, "upper_bound": 10}],
        "parameter_space": [
            X,
            {"name": "lr", "type": "real", "lower_bound": 1e-4, "upper_bound": 1, "log": True},
            {"name": "alg", "type": "categorical", "categories": ["lu", "qr"]},
        ],
        "output_space": [{"name": "acc", "goal": "maximize"}],
        "constraints": {"c": "x < lr * 100 or alg == 'qr'"},
    }
    problem = ProblemSpace.parse(spec)
    again = ProblemSpace.parse(problem.model_dump())
    assert again == problem
    assert again.model_dump()["constraints"] == {"c": "x < lr * 100 or alg == 'qr'"}
    assert again.objective().goal == "maximize"


def test_callable_constraints_are_checked_for_names_and_not_serialised() -> None:
    problem = ProblemSpace.parse({"parameter_space": [X], "constraints": {"c": lambda x: x < 0.5}})
    assert problem.satisfies({"x": 0.2}) and not problem.satisfies({"x": 0.7})
    assert problem.model_dump()["constraints"] == {}
    with pytest.raises(InvalidInputError, match="constraints.c"):
        ProblemSpace.parse({"parameter_space": [X], "constraints": {"c": lambda q: q < 0.5}})


# -- the safe evaluator ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os').system('true')",
        "x.__class__",
        "(lambda: 1)()",
        "[i for i in range(3)]",
        "open('/etc/passwd')",
        "getattr(x, 'real')",
        "x[0]",
        "__builtins__",
        "f'{x}'",
        "x := 1",
    ],
)
def test_safe_evaluator_rejects_anything_but_whitelisted_syntax(source: str) -> None:
    with pytest.raises(InvalidInputError):
        SafeExpression(source, field="constraints.c")


def test_safe_evaluator_computes_arithmetic_comparisons_and_functions() -> None:
    expr = SafeExpression("p * q == nproc and sqrt(nb) >= 2 and alg in ['lu', 'qr'] and 2 ** k < 1e3")
    assert expr.names == {"p", "q", "nproc", "nb", "alg", "k"}
    assert expr.evaluate({"p": 2, "q": 3, "nproc": 6, "nb": 4, "alg": "lu", "k": 9}) is True
    assert expr.evaluate({"p": 2, "q": 3, "nproc": 6, "nb": 4, "alg": "lu", "k": 10}) is False


def test_huge_powers_and_errors_make_a_point_invalid_not_a_crash() -> None:
    c = Constraint.from_spec("c", "10 ** (10 ** k) > 0")
    assert c({"k": 9}) is False  # exponent too large: refused, not computed
    assert Constraint.from_spec("d", "1 / x > 0")({"x": 0}) is False


def test_overlong_expressions_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="longer than"):
        SafeExpression("x + " * 1000 + "x")


# -- encoding ----------------------------------------------------------------------------------


def _real_values(p: Real) -> st.SearchStrategy[float]:
    return st.floats(p.lower_bound, p.upper_bound, allow_nan=False)


@st.composite
def space_and_points(draw: st.DrawFn) -> tuple[Space, list[dict]]:
    params: list = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["real", "real_log", "int", "int_log", "cat"]))
        name = f"p{i}"
        if kind.startswith("real"):
            lo = draw(st.floats(1e-6 if kind == "real_log" else -1e6, 1e5, allow_nan=False))
            width = draw(st.floats(1e-3, 1e6, allow_nan=False))
            params.append(Real(name=name, lower_bound=lo, upper_bound=lo + width, log=kind == "real_log"))
        elif kind.startswith("int"):
            lo = draw(st.integers(1 if kind == "int_log" else -1000, 1000))
            params.append(
                Integer(name=name, lower_bound=lo, upper_bound=lo + draw(st.integers(0, 10_000)), log=kind == "int_log")
            )
        else:
            cats = draw(st.lists(st.one_of(st.text(max_size=5), st.integers()), min_size=1, max_size=8, unique_by=repr))
            params.append(Categorical(name=name, categories=cats))
    space = Space(parameters=params)
    points = []
    for _ in range(draw(st.integers(1, 5))):
        point = {}
        for p in params:
            if isinstance(p, Real):
                point[p.name] = draw(_real_values(p))
            elif isinstance(p, Integer):
                point[p.name] = draw(st.integers(int(p.lower_bound), int(p.upper_bound)))
            else:
                point[p.name] = draw(st.sampled_from(p.categories))
        points.append(point)
    return space, points


@settings(max_examples=300, deadline=None)
@given(space_and_points())
def test_encoding_round_trips_every_valid_point(case: tuple[Space, list[dict]]) -> None:
    space, points = case
    unit = space.encode(points)
    assert unit.shape == (len(points), space.dimension)
    assert np.all((unit >= 0) & (unit <= 1))
    decoded = space.decode(unit)
    for original, back in zip(points, decoded):
        for p in space.parameters:
            if isinstance(p, Real):
                assert back[p.name] == pytest.approx(
                    original[p.name], rel=1e-12, abs=1e-9 * (p.upper_bound - p.lower_bound)
                )
            else:  # integers and categories are exact
                assert back[p.name] == original[p.name] and type(back[p.name]) is type(original[p.name])
        assert space.contains(back)


@settings(max_examples=200, deadline=None)
@given(st.integers(-50, 50), st.integers(0, 200), st.floats(0, 1))
def test_any_unit_point_decodes_into_the_space(lo: int, width: int, u: float) -> None:
    p = Integer(name="k", lower_bound=lo, upper_bound=lo + width)
    (k,) = p.from_unit(np.array([u]))
    assert lo <= k <= lo + width
    # the bin of k contains u: encoding k lands within half a bin of u
    assert abs(p.to_unit([k])[0] - u) <= 0.5 / (width + 1) + 1e-12


def test_integer_bins_are_equal_so_uniform_sampling_is_uniform() -> None:
    p = Integer(name="k", lower_bound=1, upper_bound=4)
    counts = np.bincount(p.from_unit(np.linspace(0, 1, 40_000, endpoint=False)), minlength=5)[1:]
    assert counts.tolist() == [10_000] * 4


def test_a_log_scaled_upper_bound_encodes_inside_the_unit_interval() -> None:
    # log(hi) - log(lo) rounds so that (log(v) - log(lo)) / (log(hi) - log(lo)) is 1 + 1 ulp at v = hi
    # for some bounds (found by Hypothesis at 595511.07...): values within the bounds must stay in [0, 1]
    for hi in (595511.0712345, 595511.07, 1e6 + 0.3, 7.7):
        p = Real(name="x", lower_bound=1.0, upper_bound=hi, log=True)
        unit = p.to_unit([1.0, hi])
        assert unit.tolist() == [0.0, 1.0]
    assert Real(name="x", lower_bound=1.0, upper_bound=10.0, log=True).to_unit([100.0])[0] == pytest.approx(2.0)


def test_categories_equal_under_double_equals_keep_bins_of_their_own() -> None:
    # True == 1 == 1.0 in Python; each is still its own category, in its own bin
    space = Space(parameters=[Categorical(name="c", categories=[True, 1, 1.0, "1"])])
    points = [{"c": v} for v in (1, 1.0, "1", True)]
    assert space.encode(points)[:, 0].tolist() == [0.375, 0.625, 0.875, 0.125]
    assert space.decode(space.encode(points)) == points
    assert [type(p["c"]) for p in space.decode(space.encode(points))] == [int, float, str, bool]
