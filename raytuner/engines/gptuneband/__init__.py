"""GPTuneBand: multitask, multi-fidelity tuning with Hyperband's brackets and one multitask model.

- :mod:`~raytuner.engines.gptuneband.engine`: :class:`GPTuneBand`, the engine;
- :mod:`~raytuner.engines.gptuneband.options`: :class:`GPTuneBandOptions`, every option of the engine and its
  scheduler;
- :mod:`~raytuner.engines.gptuneband.plan`: where a run stands (passes, stages, budgets);
- :mod:`~raytuner.engines.gptuneband.sampler`: the multitask model that picks each stage's configurations;
- :mod:`~raytuner.engines.gptuneband.brackets`: which evaluations each rung of each bracket holds.

>>> from raytuner.engines.gptuneband import GPTuneBand
>>> GPTuneBand.name
'gptuneband'
"""

from raytuner.engines.gptuneband.engine import GPTuneBand
from raytuner.engines.gptuneband.options import GPTuneBandOptions

__all__ = ["GPTuneBand", "GPTuneBandOptions"]
