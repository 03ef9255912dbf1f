"""Model settings shared by the tests (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

from raytuner.models import LCMOptions

#: A cheap LCM (one start, few iterations) for the tests of a face, a scheduler or a store rather than of the
#: model: what they assert holds whatever the model suggests.
FAST = LCMOptions(n_starts=1, warm_starts=1, max_iterations=60, warm_iterations=20, screen=2)
