"""Ray Tune trial schedulers of raytuner (installed as ``raytuner.schedulers``).

>>> from raytuner.schedulers import GPTuneBandScheduler, GPTuneBandSearcher
"""

from raytuner.schedulers.band import BandOptions, GPTuneBandScheduler
from raytuner.schedulers.band_searcher import GPTuneBandSearcher

__all__ = ["BandOptions", "GPTuneBandScheduler", "GPTuneBandSearcher"]
