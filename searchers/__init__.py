"""Ray Tune searchers backed by raytuner strategies (installed as ``raytuner.searchers``).

>>> from raytuner.searchers import RandomSearcher, StrategySearcher
"""

from raytuner.searchers.strategy_searcher import RandomSearcher, StrategySearcher

__all__ = ["StrategySearcher", "RandomSearcher"]
