"""Constraints over named parameters, and a safe evaluator for expression strings.

A constraint is either a Python callable whose argument names are parameter
names, or an expression string such as ``"mb * 8 <= m and p <= nproc"``.
Expression strings may arrive from JSON meta descriptions or remote clients, so
they are parsed into a whitelisted AST (arithmetic, comparisons, boolean
operators, ``in`` over literal lists and a few math functions) and evaluated by
walking that tree: ``eval`` is never called.

Example:
    >>> c = Constraint.from_spec("c1", "x + y <= 10 and sqrt(y) < 3")
    >>> sorted(c.names)
    ['x', 'y']
    >>> c({"x": 2, "y": 4})
    True
    >>> Constraint.from_spec("bad", "__import__('os')")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: constraints.bad: function '__import__' is not allowed (allowed: abs, ceil, exp, float, floor, int, log, log10, log2, max, min, round, sqrt)
"""

from __future__ import annotations

import ast
import inspect
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from raytuner.errors import InvalidInputError

__all__ = ["Constraint", "SafeExpression", "MAX_EXPRESSION_LENGTH"]

MAX_EXPRESSION_LENGTH = 2000
_MAX_POWER_EXPONENT = 1024
_MAX_DEPTH = 50

_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "ceil": math.ceil,
    "exp": math.exp,
    "float": float,
    "floor": math.floor,
    "int": int,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "max": max,
    "min": min,
    "round": round,
    "sqrt": math.sqrt,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "True": True, "False": False}


def _safe_pow(base: Any, exponent: Any) -> Any:
    if abs(exponent) > _MAX_POWER_EXPONENT:
        raise ValueError(f"exponent {exponent} exceeds {_MAX_POWER_EXPONENT}")
    return operator.pow(base, exponent)


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _safe_pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class SafeExpression:
    """A parsed, whitelisted expression over named values.

    Args:
        source: the expression: arithmetic, comparisons, ``and``/``or``/``not``, ``in`` over literal lists,
            the functions of the module docstring.
        field: the field named in errors (default ``"expression"``).

    >>> SafeExpression("2 ** n - 1", field="c").evaluate({"n": 3})
    7
    """

    def __init__(self, source: str, field: str = "expression") -> None:
        if not isinstance(source, str) or not source.strip():
            raise InvalidInputError(field, "an expression must be a non-empty string")
        if len(source) > MAX_EXPRESSION_LENGTH:
            raise InvalidInputError(field, f"expression longer than {MAX_EXPRESSION_LENGTH} characters")
        self.source = source
        self.field = field
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            raise InvalidInputError(field, f"not a valid expression: {exc.msg}") from None
        self.names: frozenset[str] = frozenset()
        names: set[str] = set()
        self._check(tree.body, names, 0)
        self.names = frozenset(names)
        self._tree = tree.body

    def _check(self, node: ast.AST, names: set[str], depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise InvalidInputError(self.field, f"expression nested deeper than {_MAX_DEPTH}")
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float, str, bool)):
                raise InvalidInputError(self.field, f"constant {node.value!r} is not allowed")
            return
        if isinstance(node, ast.Name):
            if node.id.startswith("__"):
                raise InvalidInputError(self.field, f"name {node.id!r} is not allowed")
            if node.id not in _CONSTANTS:
                names.add(node.id)
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            children = [node.left, node.right]
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            children = [node.operand]
        elif isinstance(node, ast.BoolOp):
            children = list(node.values)
        elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            children = [node.left, *node.comparators]
        elif isinstance(node, ast.IfExp):
            children = [node.test, node.body, node.orelse]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            children = list(node.elts)
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
                shown = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                raise InvalidInputError(self.field, f"function {shown!r} is not allowed", allowed=sorted(_FUNCTIONS))
            if node.keywords:
                raise InvalidInputError(self.field, "keyword arguments are not allowed")
            children = list(node.args)
        else:
            raise InvalidInputError(
                self.field,
                f"{type(node).__name__} is not allowed in an expression",
                allowed=[
                    "arithmetic",
                    "comparisons",
                    "and/or/not",
                    "x if c else y",
                    "in [literal list]",
                    "calls to " + "/".join(sorted(_FUNCTIONS)),
                ],
            )
        for child in children:
            self._check(child, names, depth + 1)

    def evaluate(self, values: Mapping[str, Any]) -> Any:
        """Evaluate with ``values`` bound to the expression's names.

        Args:
            values: a value for each name the expression uses.
        """
        return self._eval(self._tree, values)

    def _eval(self, node: ast.AST, values: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in values:
                return values[node.id]
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            raise InvalidInputError(self.field, f"no value for name {node.id!r}")
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._eval(node.left, values), self._eval(node.right, values))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._eval(node.operand, values))
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                result: Any = True
                for v in node.values:
                    result = self._eval(v, values)
                    if not result:
                        return result
                return result
            result = False
            for v in node.values:
                result = self._eval(v, values)
                if result:
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, values)
            for op, comp in zip(node.ops, node.comparators):
                right = self._eval(comp, values)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            branch = node.body if self._eval(node.test, values) else node.orelse
            return self._eval(branch, values)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return tuple(self._eval(e, values) for e in node.elts)
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)
            return _FUNCTIONS[node.func.id](*(self._eval(a, values) for a in node.args))
        raise AssertionError(f"unchecked node {type(node).__name__}")  # pragma: no cover


@dataclass(frozen=True)
class Constraint:
    """A named constraint: ``True`` means the point is valid.

    Build it with :meth:`from_spec` from either an expression string or a
    callable. A callable receives the parameters it names as keyword
    arguments (or all of them if it takes ``**kwargs``).

    >>> c = Constraint.from_spec("fits", lambda mb, m: mb * 8 <= m)
    >>> c({"mb": 2, "m": 100, "other": 1})
    True
    """

    name: str
    names: frozenset[str]
    source: str | None = None
    _function: Callable[..., Any] | None = field(default=None, repr=False, compare=False)
    _expression: SafeExpression | None = field(default=None, repr=False, compare=False)
    _takes_all: bool = False

    @classmethod
    def from_spec(cls, name: str, spec: str | Callable[..., Any] | Constraint) -> Constraint:
        """Make a constraint from an expression string, a callable or a Constraint.

        Args:
            name: the constraint's name.
            spec: an expression string, a callable or a Constraint.
        """
        if isinstance(spec, Constraint):
            return spec
        field_name = f"constraints.{name}"
        if isinstance(spec, str):
            expr = SafeExpression(spec, field=field_name)
            return cls(name=name, names=expr.names, source=spec, _expression=expr)
        if callable(spec):
            try:
                signature = inspect.signature(spec)
            except (TypeError, ValueError):
                raise InvalidInputError(field_name, "cannot read the callable's argument names") from None
            takes_all = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
            names = frozenset(
                p.name for p in signature.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            )
            return cls(name=name, names=names, _function=spec, _takes_all=takes_all)
        raise InvalidInputError(
            field_name, f"a constraint must be an expression string or a callable, not {type(spec).__name__}"
        )

    @property
    def is_expression(self) -> bool:
        """Whether the constraint is an expression string (and so serialisable)."""
        return self._expression is not None

    def __call__(self, values: Mapping[str, Any]) -> bool:
        """Evaluate on a point; an error while evaluating counts as invalid."""
        try:
            if self._expression is not None:
                return bool(self._expression.evaluate(values))
            assert self._function is not None
            kwargs = dict(values) if self._takes_all else {n: values[n] for n in self.names}
            return bool(self._function(**kwargs))
        except (ArithmeticError, ValueError, TypeError, KeyError):
            return False
