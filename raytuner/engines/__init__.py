"""Tuning engines: Ray-free ask/tell engines, rebuilt by replaying the evaluation log.

Every engine is built by name from an :class:`EngineSpec` (:func:`build_engine`,
:data:`ENGINES`) and knows its own spec (:attr:`Engine.spec`).

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> engine = build_engine(EngineSpec("random"), ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}], seed=0)
    >>> engine.spec.to_dict()
    {'name': 'random', 'options': {}}
"""

from raytuner.engines.bandit import BanditStructure
from raytuner.engines.base import Engine, Suggestion, task_key
from raytuner.engines.discrete import DiscreteBO
from raytuner.engines.gptuneband.engine import GPTuneBand
from raytuner.engines.mla import MLA
from raytuner.engines.multifidelity import MultiFidelityEngine
from raytuner.engines.random_search import RandomSearch
from raytuner.engines.registry import ENGINES, build_engine, fresh_engine
from raytuner.engines.spec import EngineSpec
from raytuner.engines.transfer import TLA1, TLA2, TransferLearning

__all__ = [
    "Engine",
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
