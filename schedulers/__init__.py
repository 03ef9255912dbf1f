"""Ray Tune trial schedulers of raytuner (installed as ``raytuner.schedulers``).

>>> from raytuner.schedulers import GPTuneBand
"""

from raytuner.schedulers.band import GPTuneBand

__all__ = ["GPTuneBand"]
