"""Strategies by name: how a service (the gRPC bridge, a CLI) builds the engine a client asks for.

Example:
    >>> from raytuner.space import ProblemSpace
    >>> problem = ProblemSpace.parse({
    ...     "parameter_space": [{"name": "bx", "type": "categorical", "categories": [32, 64, 128]}],
    ...     "output_space": [{"name": "time"}]})
    >>> engine = make_strategy("discrete", problem, [{}], seed=0, n_initial=2)
    >>> engine.name, sorted(STRATEGIES)
    ('discrete', ['band', 'discrete', 'mla', 'random'])
    >>> make_strategy("bogus", problem, [{}])
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: strategy: unknown strategy 'bogus' (allowed: band, discrete, mla, random)
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from raytuner.errors import InvalidInputError
from raytuner.space import ProblemSpace
from raytuner.strategies.band import GPTuneBand
from raytuner.strategies.base import Strategy
from raytuner.strategies.discrete import DiscreteBO
from raytuner.strategies.mla import MLA
from raytuner.strategies.random_search import RandomSearch

__all__ = ["STRATEGIES", "make_strategy"]

#: Strategy name -> its class; each takes ``(problem, tasks, seed, **options)``.
STRATEGIES: dict[str, Callable[..., Strategy]] = {
    "random": RandomSearch,
    "mla": MLA,
    "band": GPTuneBand,
    "discrete": DiscreteBO,
}


def make_strategy(name: str, problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]], seed: int | None = None,
                  **options: Any) -> Strategy:
    """The strategy ``name`` over ``tasks``; ``options`` are its keyword options (checked by the strategy)."""
    factory = STRATEGIES.get(name)
    if factory is None:
        raise InvalidInputError("strategy", f"unknown strategy {name!r}", allowed=sorted(STRATEGIES))
    try:
        return factory(problem, list(tasks), seed, **options)
    except TypeError as exc:        # an option the strategy does not take
        raise InvalidInputError("options", f"{name}: {exc}") from None
