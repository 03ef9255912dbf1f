"""Tuning engines: Ray-free ask/tell strategies, rebuilt by replaying the evaluation log."""

from raytuner.strategies.band import GPTuneBand
from raytuner.strategies.bandit import BanditStructure
from raytuner.strategies.base import Strategy, Suggestion, task_key
from raytuner.strategies.discrete import DiscreteBO
from raytuner.strategies.mla import MLA
from raytuner.strategies.random_search import RandomSearch
from raytuner.strategies.registry import STRATEGIES, make_strategy

__all__ = ["Strategy", "Suggestion", "RandomSearch", "MLA", "GPTuneBand", "BanditStructure", "DiscreteBO",
           "STRATEGIES", "make_strategy", "task_key"]
