"""Tuning engines: Ray-free ask/tell strategies, rebuilt by replaying the evaluation log.

Every engine is built by name from an :class:`EngineSpec` (:func:`build_engine`,
:data:`ENGINES`) and knows its own spec (:attr:`Strategy.spec`).

Example:
    >>> from raytuner.space import ProblemSpace
    >>> from raytuner.problems import DEMO_PROBLEM
    >>> engine = build_engine(EngineSpec("random"), ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}], seed=0)
    >>> engine.spec.to_dict()
    {'name': 'random', 'options': {}}
"""

from raytuner.strategies.band import GPTuneBand
from raytuner.strategies.bandit import BanditStructure
from raytuner.strategies.base import Strategy, Suggestion, task_key
from raytuner.strategies.discrete import DiscreteBO
from raytuner.strategies.mla import MLA
from raytuner.strategies.multifidelity import MultiFidelityEngine
from raytuner.strategies.random_search import RandomSearch
from raytuner.strategies.registry import ENGINES, build_engine, fresh_engine
from raytuner.strategies.spec import EngineSpec
from raytuner.strategies.transfer import TLA1, TLA2, TransferLearning

__all__ = [
    "Strategy",
    "Suggestion",
    "RandomSearch",
    "MLA",
    "GPTuneBand",
    "BanditStructure",
    "DiscreteBO",
    "TLA1",
    "TLA2",
    "TransferLearning",
    "MultiFidelityEngine",
    "EngineSpec",
    "ENGINES",
    "build_engine",
    "fresh_engine",
    "task_key",
]
