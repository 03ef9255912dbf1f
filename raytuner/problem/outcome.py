"""What a reported result means for a problem: a measurement, or the reason it is a failure.

Every face that takes a result for a suggestion it handed out (a session's
``tell``, an engine's ``tell(suggestion, outputs)``) decides here, so the
same result is a failure, with the same reason, everywhere.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> result_failure(problem, {"y": 0.5}) is None
    True
    >>> result_failure(problem, {"y": None}), result_failure(problem, None)
    ('y: no value', 'no output reported')
    >>> result_failure(problem, {"z": 1.0})
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: outputs['z']: not an output of the problem (allowed: y)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raytuner.errors import InvalidInputError
from raytuner.problem.records import parse_outputs
from raytuner.problem.space import ProblemSpace

__all__ = ["result_failure"]


def result_failure(problem: ProblemSpace, result: Mapping[str, Any] | None) -> str | None:
    """Why ``result`` is no measurement of ``problem`` (``None``: it is one).

    ``None``, an empty mapping, a value that is not a finite number (``None``,
    NaN, text) or a missing objective make a failed evaluation, with the
    reason returned; a name that is no output of the problem is refused.

    Args:
        problem: The problem whose outputs the result reports.
        result: Output names to reported values (``None``: nothing reported).

    Raises:
        InvalidInputError: A reported name is not an output of the problem.
    """
    if result is None or not isinstance(result, Mapping):
        return parse_outputs(result)[1]
    values, failure = parse_outputs(result) if result else ({}, None)
    if failure is not None:
        return failure
    objectives = problem.objectives
    for name in values:
        if name not in objectives:
            raise InvalidInputError(f"outputs[{name!r}]", "not an output of the problem", allowed=objectives)
    missing = [o for o in objectives if o not in values]
    return f"output {missing[0]!r} missing from the reported result" if missing else None
