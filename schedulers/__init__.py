"""Ray Tune trial schedulers of raytuner (installed as ``raytuner.schedulers``).

>>> from raytuner.schedulers import GPTuneBandScheduler, GPTuneBandSearcher
"""

from raytuner.schedulers.gptuneband import GPTuneBandOptions, GPTuneBandScheduler
from raytuner.schedulers.gptuneband_searcher import GPTuneBandSearcher

__all__ = ["GPTuneBandOptions", "GPTuneBandScheduler", "GPTuneBandSearcher"]
