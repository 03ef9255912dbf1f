"""Ray Tune searchers backed by raytuner strategies (installed as ``raytuner.searchers``).

>>> from raytuner.searchers import (DiscreteBOSearcher, GPTuneBandSearcher, LCMSearcher, RandomSearcher,
...                                 StrategySearcher, TLASearcher)
"""

from raytuner.searchers.band_searcher import GPTuneBandSearcher
from raytuner.searchers.discrete_searcher import DiscreteBOSearcher
from raytuner.searchers.lcm_searcher import LCMSearcher
from raytuner.searchers.strategy_searcher import RandomSearcher, StrategySearcher
from raytuner.searchers.tla_searcher import TLASearcher

__all__ = ["StrategySearcher", "RandomSearcher", "LCMSearcher", "GPTuneBandSearcher", "TLASearcher",
           "DiscreteBOSearcher"]
